#!/usr/bin/env python3
"""tshark 4.0 as an oracle: one canonical row per RTPS submessage.

    tshark_rows.py CAPTURE [-o OUT.jsonl] [--tshark PATH]

Runs

    tshark -r CAPTURE -T json --no-duplicate-keys -J "frame vlan ieee8021ad ip ipv6 udp rtps"

(IP reassembly on, tshark's default; RTPS DATA_FRAG reassembly off, its
default) and turns each packet's parallel arrays `rtps.sm.id` /
`rtps.sm.id_tree` into one JSON object per submessage, with the same keys as
`ddscope dissect --format jsonl` (see docs/oracle.md for the field mapping).

The JSON is read packet by packet: tshark pretty-prints the top-level array
with each packet opening on a line "  {" and closing on "  }" or "  },", and
JSON strings never contain a raw newline, so those lines delimit packets
exactly. Memory stays bounded by the largest packet, not the capture.

Only the Python standard library is used; this file never imports ddscope code.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import IO, Iterable, Iterator

# `vlan` dissects 802.1Q tags (TPID 0x8100); `ieee8021ad` dissects 802.1ad
# service tags (TPID 0x88a8). Both are needed for the outermost PCP.
TSHARK_PROTOCOLS = "frame vlan ieee8021ad ip ipv6 udp rtps"

KIND_BY_ID = {
    0x01: "PAD", 0x06: "ACKNACK", 0x07: "HEARTBEAT", 0x08: "GAP", 0x09: "INFO_TS",
    0x0C: "INFO_SRC", 0x0D: "INFO_REPLY_IP4", 0x0E: "INFO_DST", 0x0F: "INFO_REPLY",
    0x12: "NACK_FRAG", 0x13: "HEARTBEAT_FRAG", 0x15: "DATA", 0x16: "DATA_FRAG",
    0x30: "SEC_BODY", 0x31: "SEC_PREFIX", 0x32: "SEC_POSTFIX", 0x33: "SRTPS_PREFIX",
    0x34: "SRTPS_POSTFIX",
}

# Submessages whose sender is the writer (writer prefix = source prefix) and
# those sent by the reader (reader prefix = source prefix).
WRITER_SENT = {"DATA", "DATA_FRAG", "HEARTBEAT", "HEARTBEAT_FRAG", "GAP"}
READER_SENT = {"ACKNACK", "NACK_FRAG"}

SEDP_WRITERS = {"000003c2", "000004c2"}  # SEDP publications / subscriptions writer
ZERO_PREFIX = "0" * 24

# Every key a row carries, in output order (null when not applicable).
ROW_KEYS = (
    "frame", "submsg_index", "kind", "vendor_id", "guid_prefix", "writer_id", "reader_id",
    "sn", "hb_first_sn", "hb_last_sn", "count", "set_base", "set_num_bits", "gap_start",
    "last_fragment_num", "fragment_starting_num", "frags_in_submsg", "fragment_size",
    "sample_size", "pcp", "vlan_id", "topic_raw", "type_raw", "endpoint_topic_raw",
    "endpoint_type_raw", "flags", "octets_to_next_header",
)


def kind_name(sm_id: int) -> str:
    if sm_id in KIND_BY_ID:
        return KIND_BY_ID[sm_id]
    if sm_id >= 0x80:
        return f"VENDOR(0x{sm_id:02x})"
    return f"UNKNOWN(0x{sm_id:02x})"


class TsharkShapeError(ValueError):
    """tshark's JSON does not have the shape the walker relies on."""


@dataclass
class WalkStats:
    packets: int = 0
    rtps_packets: int = 0
    rows: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


# ---- running tshark and splitting its output ---------------------------------

def tshark_path(explicit: str | None = None) -> str:
    path = explicit or os.environ.get("TSHARK") or shutil.which("tshark")
    if not path:
        raise FileNotFoundError("tshark is not installed (apt-get install tshark)")
    return path


def tshark_command(capture: str, tshark: str | None = None, rtps_reassembly: bool = False,
                   display_filter: str | None = None) -> list[str]:
    cmd = [tshark_path(tshark), "-r", str(capture), "-T", "json", "--no-duplicate-keys",
           "-J", TSHARK_PROTOCOLS]
    if rtps_reassembly:
        cmd += ["-o", "rtps.enable_rtps_reassembly:TRUE"]
    if display_filter:
        cmd += ["-Y", display_filter]
    return cmd


def split_packets(lines: Iterable[str]) -> Iterator[dict]:
    """Yields each packet object of tshark's pretty-printed `-T json` array."""
    buf: list[str] | None = None
    for line in lines:
        if buf is None:
            if line.rstrip("\r\n") == "  {":
                buf = ["{"]
            continue
        stripped = line.rstrip("\r\n")
        if stripped in ("  }", "  },"):
            buf.append("}")
            yield json.loads("".join(buf))
            buf = None
        else:
            buf.append(stripped)
    if buf is not None:
        raise TsharkShapeError("tshark JSON ended inside a packet (tshark killed or output truncated?)")


def tshark_packets(capture: str, tshark: str | None = None, rtps_reassembly: bool = False,
                   display_filter: str | None = None) -> Iterator[dict]:
    """Runs tshark and yields the `layers` object of every packet. A tshark
    failure raises RuntimeError with its message; a consumer that stops early
    just stops tshark."""
    cmd = tshark_command(capture, tshark, rtps_reassembly, display_filter)
    # stderr goes to a file: a pipe nobody reads while stdout streams could fill up.
    with tempfile.TemporaryFile(mode="w+") as err, \
            subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1 << 20) as proc:
        finished = False
        try:
            for pkt in split_packets(proc.stdout):
                yield pkt["_source"]["layers"]
            finished = True
        except TsharkShapeError:
            proc.wait()
            if proc.returncode == 0:
                raise
            finished = True  # report tshark's own error below
        finally:
            if not finished:
                proc.kill()
            proc.stdout.close()
            rc = proc.wait()
        if rc != 0:
            err.seek(0)
            msg = "\n".join(l for l in err.read().splitlines() if "Running as user" not in l)
            raise RuntimeError(f"{' '.join(cmd)} exited {rc}: {msg.strip()}")


# ---- walking one packet --------------------------------------------------------

def _as_list(v) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def _one(tree: dict, key: str, frame: int, idx: int):
    """A field that must occur at most once in this subtree."""
    v = tree.get(key)
    if isinstance(v, list):
        raise TsharkShapeError(f"frame {frame} submsg {idx}: {key} occurs {len(v)} times, expected once")
    return v


def _int(v) -> int | None:
    if v is None:
        return None
    return int(v, 0) if isinstance(v, str) else int(v)


def _hex_prefix(v: str | None) -> str | None:
    return None if v is None else v.replace(":", "").lower()


def _entity(v: str | None) -> str | None:
    """"0x000003c2" -> "000003c2"."""
    if v is None:
        return None
    return f"{int(v, 16):08x}"


def outer_vlan(layers: dict) -> tuple[int | None, int | None]:
    """(pcp, vid) of the outermost tag. Keys keep the order of the frame, so the
    first tag layer met is the outermost; a repeated layer is a list, outermost first."""
    for key, value in layers.items():
        if key == "vlan":
            tag = _as_list(value)[0]
            return _int(tag.get("vlan.priority")), _int(tag.get("vlan.id"))
        if key == "ieee8021ad":
            tag = _as_list(value)[0]
            return _int(tag.get("ieee8021ad.priority")), _int(tag.get("ieee8021ad.id"))
    return None, None


def _param_list_entries(plist: dict) -> Iterator[dict]:
    """The parameters of a tshark ParameterList subtree (labels like PID_TOPIC_NAME;
    a label used twice becomes a list under --no-duplicate-keys)."""
    for value in plist.values():
        for item in _as_list(value):
            if isinstance(item, dict) and "rtps.param.id" in item:
                yield item


def endpoint_names(serialized: dict | None) -> tuple[str | None, str | None]:
    """PID_TOPIC_NAME (0x0005) and PID_TYPE_NAME (0x0007) of a decoded SEDP sample."""
    if not isinstance(serialized, dict):
        return None, None
    plist = serialized.get("serializedData:")
    if not isinstance(plist, dict):
        return None, None
    topic = type_ = None
    for p in _param_list_entries(plist):
        pid = int(p["rtps.param.id"], 16)
        if pid == 0x0005 and topic is None:
            topic = p.get("rtps.param.topicName")
        elif pid == 0x0007 and type_ is None:
            type_ = p.get("rtps.param.typeName")
    return topic, type_


def inline_qos_length(tree: dict) -> int | None:
    """Bytes of the inline QoS parameter list: 4 + length per parameter; tshark
    shows no length for PID_SENTINEL (0x0001), whose length is 0."""
    plist = tree.get("inlineQos:")
    if not isinstance(plist, dict):
        return None
    total, saw_sentinel = 0, False
    for p in _param_list_entries(plist):
        if int(p["rtps.param.id"], 16) == 0x0001:
            total += 4
            saw_sentinel = True
            continue
        length = p.get("rtps.param.length")
        if length is None or isinstance(length, list):
            return None
        total += 4 + int(length)
    return total if saw_sentinel else None


def rows_from_layers(layers: dict, stats: WalkStats | None = None) -> list[dict]:
    """All submessage rows of one tshark packet (empty if it carries no RTPS)."""
    stats = stats if stats is not None else WalkStats()
    stats.packets += 1
    rtps = layers.get("rtps")
    if rtps is None:
        return []
    frame_info = layers["frame"]
    frame = int(frame_info["frame.number"])
    protocols = frame_info.get("frame.protocols", "").split(":")
    if isinstance(rtps, list):
        raise TsharkShapeError(f"frame {frame}: {len(rtps)} RTPS layers in one frame")
    # RTPS quoted inside an ICMP error is not traffic; RTPS over TCP is out of scope.
    if "icmp" in protocols or "icmpv6" in protocols:
        stats.skip("rtps quoted in icmp")
        return []
    if "rtps" not in protocols or protocols[protocols.index("rtps") - 1] != "udp":
        stats.skip("rtps not over udp")
        return []
    major = rtps.get("rtps.version_tree", {}).get("rtps.version.major")
    if major != "2":
        stats.skip(f"rtps major version {major}")
        return []
    stats.rtps_packets += 1

    udp = _as_list(layers.get("udp"))[-1]
    udp_len = _int(udp.get("udp.length")) if isinstance(udp, dict) else None
    pcp, vid = outer_vlan(layers)
    src_prefix = _hex_prefix(rtps.get("rtps.guidPrefix.src"))
    dst_prefix = ZERO_PREFIX
    vendor = rtps.get("rtps.vendorId")

    ids = _as_list(rtps.get("rtps.sm.id"))
    trees = _as_list(rtps.get("rtps.sm.id_tree"))
    if len(ids) != len(trees):
        raise TsharkShapeError(f"frame {frame}: {len(ids)} rtps.sm.id but {len(trees)} rtps.sm.id_tree")

    rows = []
    offset = 20  # RTPS header
    for idx, (sm_id_s, tree) in enumerate(zip(ids, trees)):
        sm_id = int(sm_id_s, 16)
        kind = kind_name(sm_id)
        # An undecoded vendor submessage has an empty subtree: "" in tshark's JSON.
        tree = tree if isinstance(tree, dict) else {}
        otnh = _int(_one(tree, "rtps.sm.octetsToNextHeader", frame, idx))
        flags = _int(_one(tree, "rtps.sm.flags", frame, idx))
        # Body length (RTPS 2.5 9.4.5.1.3): 0 means "to the end of the message",
        # except for PAD and INFO_TS whose body may really be empty.
        body_len = otnh
        if otnh == 0 and kind not in ("PAD", "INFO_TS") and udp_len is not None:
            body_len = udp_len - 8 - offset - 4
        row = dict.fromkeys(ROW_KEYS)
        row.update(frame=frame, submsg_index=idx, kind=kind, vendor_id=vendor, pcp=pcp, vlan_id=vid,
                   flags=flags, octets_to_next_header=otnh)

        if kind == "INFO_SRC":
            p = _hex_prefix(_one(tree, "rtps.guidPrefix.src", frame, idx))
            if p is None:
                raise TsharkShapeError(f"frame {frame} submsg {idx}: INFO_SRC without rtps.guidPrefix.src")
            src_prefix = p
            vendor = _one(tree, "rtps.vendorId", frame, idx) or vendor
        elif kind == "INFO_DST":
            p = _hex_prefix(_one(tree, "rtps.guidPrefix.dst", frame, idx))
            if p is None:
                raise TsharkShapeError(f"frame {frame} submsg {idx}: INFO_DST without rtps.guidPrefix.dst")
            dst_prefix = p
        row["guid_prefix"] = src_prefix
        row["vendor_id"] = vendor

        wr = _entity(_one(tree, "rtps.sm.wrEntityId", frame, idx))
        rd = _entity(_one(tree, "rtps.sm.rdEntityId", frame, idx))
        if kind in WRITER_SENT:
            row["writer_id"] = src_prefix + wr if wr else None
            row["reader_id"] = dst_prefix + rd if rd else None
        elif kind in READER_SENT:
            row["writer_id"] = dst_prefix + wr if wr else None
            row["reader_id"] = src_prefix + rd if rd else None

        topic_info = tree.get("[Topic Information (from Discovery)]")
        if kind in WRITER_SENT and isinstance(topic_info, dict):
            row["topic_raw"] = topic_info.get("rtps.param.topicName")
            row["type_raw"] = topic_info.get("rtps.param.typeName")

        seq = tree.get("rtps.sm.seqNumber")
        if kind == "DATA":
            row["sn"] = _int(_one(tree, "rtps.sm.seqNumber", frame, idx))
            d_flag, k_flag, q_flag = flags & 0x04, flags & 0x08, flags & 0x02
            otiq = _int(_one(tree, "rtps.octets_to_inline_qos", frame, idx))
            qos = inline_qos_length(tree) if q_flag else 0
            if (d_flag or k_flag) and body_len is not None and otiq is not None and qos is not None:
                row["sample_size"] = body_len - 4 - otiq - qos
            if wr in SEDP_WRITERS:
                row["endpoint_topic_raw"], row["endpoint_type_raw"] = endpoint_names(
                    tree.get("serializedData") if d_flag else None)
        elif kind == "DATA_FRAG":
            row["sn"] = _int(_one(tree, "rtps.sm.seqNumber", frame, idx))
            row["fragment_starting_num"] = _int(_one(tree, "rtps.data_frag.number", frame, idx))
            row["frags_in_submsg"] = _int(_one(tree, "rtps.data_frag.num_fragments", frame, idx))
            row["fragment_size"] = _int(_one(tree, "rtps.data_frag.size", frame, idx))
            row["sample_size"] = _int(_one(tree, "rtps.data_frag.sample_size", frame, idx))
            if wr in SEDP_WRITERS:
                # With reassembly on (second pass) the completing fragment has the sample.
                row["endpoint_topic_raw"], row["endpoint_type_raw"] = endpoint_names(tree.get("reassembled sample"))
        elif kind == "HEARTBEAT":
            seqs = _as_list(seq)
            if len(seqs) != 2:
                raise TsharkShapeError(f"frame {frame} submsg {idx}: HEARTBEAT with {len(seqs)} sequence numbers")
            row["hb_first_sn"], row["hb_last_sn"] = int(seqs[0]), int(seqs[1])
            row["count"] = _int(_one(tree, "rtps.heartbeat_count", frame, idx))
        elif kind == "HEARTBEAT_FRAG":
            row["sn"] = _int(_one(tree, "rtps.sm.seqNumber", frame, idx))
            row["last_fragment_num"] = _int(_one(tree, "rtps.heartbeat_frag.number", frame, idx))
            row["count"] = _int(_one(tree, "rtps.heartbeat_frag.count", frame, idx))
        elif kind == "ACKNACK":
            state = tree.get("readerSNState") or {}
            row["set_base"] = _int(_one(state, "rtps.sm.seqNumber", frame, idx))
            row["set_num_bits"] = _int(_one(state, "rtps.bitmap.num_bits", frame, idx))
            row["count"] = _int(_one(tree, "rtps.acknack.count", frame, idx))
        elif kind == "NACK_FRAG":
            row["sn"] = _int(_one(tree, "rtps.sm.seqNumber", frame, idx))
            state = tree.get("fragmentNumberState") or {}
            base = _one(state, "rtps.fragment_number.base32", frame, idx)
            if base is None:
                base = _one(state, "rtps.fragment_number.base", frame, idx)
            row["set_base"] = _int(base)
            row["set_num_bits"] = _int(_one(state, "rtps.fragment_number.num_bits", frame, idx))
            row["count"] = _int(_one(tree, "rtps.nack_frag.count", frame, idx))
        elif kind == "GAP":
            row["gap_start"] = _int(_one(tree, "rtps.sm.seqNumber", frame, idx))
            gap_list = tree.get("gapList") or {}
            row["set_base"] = _int(_one(gap_list, "rtps.sm.seqNumber", frame, idx))
            row["set_num_bits"] = _int(_one(gap_list, "rtps.bitmap.num_bits", frame, idx))

        rows.append(row)
        if body_len is None:
            # Cannot locate later submessages' offsets; only the 0-length tail case needs them.
            offset = None
        elif offset is not None:
            offset += 4 + body_len
    stats.rows += len(rows)
    return rows


# ---- whole capture ------------------------------------------------------------------

def _is_sedp_frag(row: dict) -> bool:
    return row["kind"] == "DATA_FRAG" and row["writer_id"] is not None and row["writer_id"][-8:] in SEDP_WRITERS


def tshark_rows(capture: str, tshark: str | None = None, stats: WalkStats | None = None) -> Iterator[dict]:
    """Yields one row per RTPS submessage, in frame order, except that SEDP
    DATA_FRAG rows come last: their topic/type needs a second tshark pass with
    RTPS reassembly on, made only if the capture has any."""
    stats = stats if stats is not None else WalkStats()
    held: list[dict] = []
    for layers in tshark_packets(capture, tshark):
        for row in rows_from_layers(layers, stats):
            if _is_sedp_frag(row):
                held.append(row)
            else:
                yield row
    if not held:
        return
    names: dict[tuple[int, int], tuple[str | None, str | None]] = {}
    flt = "rtps.reassembled.length && (rtps.sm.wrEntityId == 0x000003c2 || rtps.sm.wrEntityId == 0x000004c2)"
    for layers in tshark_packets(capture, tshark, rtps_reassembly=True, display_filter=flt):
        for row in rows_from_layers(layers, WalkStats()):
            if _is_sedp_frag(row) and row["endpoint_topic_raw"] is not None:
                names[(row["frame"], row["submsg_index"])] = (row["endpoint_topic_raw"], row["endpoint_type_raw"])
    for row in held:
        row["endpoint_topic_raw"], row["endpoint_type_raw"] = names.get((row["frame"], row["submsg_index"]), (None, None))
        yield row


def write_jsonl(rows: Iterable[dict], out: IO[str]) -> int:
    n = 0
    for row in rows:
        out.write(json.dumps(row, separators=(",", ":")) + "\n")
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture", help="pcap / pcapng (gzip is fine: tshark reads it directly)")
    ap.add_argument("-o", "--output", help="write JSONL here instead of stdout")
    ap.add_argument("--tshark", help="tshark executable (default: $TSHARK or tshark on PATH)")
    args = ap.parse_args(argv)
    if not os.path.exists(args.capture):
        print(f"tshark_rows: {args.capture}: no such file", file=sys.stderr)
        return 2
    stats = WalkStats()
    out = open(args.output, "w") if args.output else sys.stdout
    try:
        write_jsonl(tshark_rows(args.capture, args.tshark, stats), out)
    except (RuntimeError, TsharkShapeError) as e:
        print(f"tshark_rows: {args.capture}: {e}", file=sys.stderr)
        return 1
    finally:
        if args.output:
            out.close()
    skipped = ", ".join(f"{k}: {v}" for k, v in sorted(stats.skipped.items())) or "none"
    print(f"tshark_rows: {args.capture}: {stats.packets} packets, {stats.rtps_packets} RTPS messages, "
          f"{stats.rows} submessages; skipped: {skipped}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
