"""Differential test of `ddscope dissect` against the oracle: tshark 4.0's RTPS dissector.

For every RTPS submessage of a capture, `ddscope dissect CAPTURE --format jsonl`
and tests/oracle/tshark_rows.py (tshark 4.0, `-T json --no-duplicate-keys`,
IP reassembly on, RTPS reassembly off) must agree on kind, writer entity id,
sequence number(s), DATA_FRAG fields, sample size and the other fields listed
in tests/oracle/compare.py; per frame on the VLAN PCP; per capture on the
SEDP-announced (topic, type) pairs. Captures: the four public ones in
../shared/captures, the project's own under examples/captures (Cyclone DDS and
Fast DDS must both be there), and fresh ddsperf captures made here in two
network namespaces (needs root; CI runs as root).

The first half tests the oracle itself (walker and comparison) without
ddscope, so a broken oracle cannot pass silently. docs/oracle.md explains the
method and tshark's quirks. Run with `pytest -s` to see each agreement summary.
"""
from __future__ import annotations

import collections
import copy
import json
import pathlib
import struct
import subprocess
import sys

import pytest

from conftest import REPO, have_root, require_tool

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "oracle"))
import compare  # noqa: E402
import synth  # noqa: E402
import tshark_rows  # noqa: E402

PUBLIC_CAPTURES = (
    "cyclone-talker-listener-loopback.pcapng",
    "fastdds-vlan-pcp-ipfrag.pcapng",
    "cyclone-interop.pcapng",
    "cyclone-datafrag.pcapng",
)
EXAMPLES = REPO / "examples" / "captures"
CAPTURE_GLOBS = ("*.pcapng.gz", "*.pcap.gz", "*.pcapng", "*.pcap")
VENDOR_CYCLONE, VENDOR_FASTDDS = "0x0110", "0x010f"
MAKE_CAPTURE = REPO / "tests" / "oracle" / "make_capture.sh"


def project_captures() -> list[pathlib.Path]:
    found: set[pathlib.Path] = set()
    for pattern in CAPTURE_GLOBS:
        found.update(EXAMPLES.rglob(pattern))
    return sorted(found)


@pytest.fixture(scope="session")
def tshark():
    return require_tool("tshark")


_ROWS_CACHE: dict[str, list[dict]] = {}


def oracle_rows(capture) -> list[dict]:
    """tshark rows of a capture, computed once per session."""
    key = str(capture)
    if key not in _ROWS_CACHE:
        stats = tshark_rows.WalkStats()
        _ROWS_CACHE[key] = list(tshark_rows.tshark_rows(key, stats=stats))
    return _ROWS_CACHE[key]


def by_key(rows) -> dict[tuple[int, int], dict]:
    return {(r["frame"], r["submsg_index"]): r for r in rows}


# =============================================================================
# The oracle's own tests (no ddscope needed)
# =============================================================================

# Values read by hand from `tshark -V -Y frame.number==N` on the public captures.
HAND_CHECKED = [
    # Fast DDS, four IP fragments (frames 112-115) reassembled at frame 115; no VLAN tag.
    ("fastdds-vlan-pcp-ipfrag.pcapng", 115, 0, dict(kind="INFO_DST", guid_prefix="010f7b3397b3250001000000", pcp=None)),
    ("fastdds-vlan-pcp-ipfrag.pcapng", 115, 2, dict(
        kind="DATA", sn=1, writer_id="010f7b3397b3250001000000000003c2",
        reader_id="010fa083540b000001000000000003c7",
        endpoint_topic_raw="ros_discovery_info",
        endpoint_type_raw="rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_")),
    ("fastdds-vlan-pcp-ipfrag.pcapng", 115, 3, dict(kind="HEARTBEAT", hb_first_sn=1, hb_last_sn=11, count=15)),
    ("fastdds-vlan-pcp-ipfrag.pcapng", 115, 33, dict(kind="HEARTBEAT", hb_first_sn=1, hb_last_sn=11, count=25)),
    # 802.1Q PRI 5 ID 30; INFO_DST then ACKNACK (sent by the reader: writer prefix = INFO_DST's).
    ("fastdds-vlan-pcp-ipfrag.pcapng", 56, 0, dict(kind="INFO_DST", pcp=5, vlan_id=30)),
    ("fastdds-vlan-pcp-ipfrag.pcapng", 56, 1, dict(
        kind="ACKNACK", pcp=5, vlan_id=30, set_base=1, set_num_bits=0, count=191,
        writer_id="010fa083540b000001000000000003c2", reader_id="010fca5251a1250001000000000003c7")),
    # Cyclone DATA_FRAG: writerSN 2, fragments 1..10 of 1344 bytes, sampleSize 65540; HEARTBEAT_FRAG.
    ("cyclone-datafrag.pcapng", 1511, 0, dict(kind="INFO_TS")),
    ("cyclone-datafrag.pcapng", 1511, 1, dict(
        kind="DATA_FRAG", sn=2, fragment_starting_num=1, frags_in_submsg=10, fragment_size=1344,
        sample_size=65540, writer_id="0110db6956be8657390c32f400000c02", topic_raw="DDSPerfRDataKS")),
    ("cyclone-datafrag.pcapng", 1511, 2, dict(kind="HEARTBEAT_FRAG", sn=2, last_fragment_num=10, count=1)),
    # NULL/loopback link type: INFO_TS then the SPDP DATA (writer 0x000100c2), 248-byte submessage.
    ("cyclone-talker-listener-loopback.pcapng", 1, 0, dict(kind="INFO_TS", guid_prefix="5ab810011636c7d51895c54e")),
    ("cyclone-talker-listener-loopback.pcapng", 1, 1, dict(
        kind="DATA", sn=1, writer_id="5ab810011636c7d51895c54e000100c2", sample_size=228, pcp=None)),
]


@pytest.mark.parametrize("capture,frame,index,expected", HAND_CHECKED,
                         ids=[f"{c.split('.')[0]}-{f}-{i}" for c, f, i, _ in HAND_CHECKED])
def test_walker_matches_hand_checked_values(shared_captures, tshark, capture, frame, index, expected):
    rows = by_key(oracle_rows(shared_captures / capture))
    assert (frame, index) in rows, f"{capture}: no row for frame {frame} submsg {index}"
    row = rows[(frame, index)]
    wrong = {k: (row.get(k), v) for k, v in expected.items() if row.get(k) != v}
    assert not wrong, f"{capture} frame {frame} submsg {index}: (walker, hand-checked) = {wrong}"


def _seq_numbers(row: dict) -> list[int]:
    """The values tshark prints as rtps.sm.seqNumber, in wire order, for one row."""
    return {
        "DATA": [row["sn"]], "DATA_FRAG": [row["sn"]], "HEARTBEAT_FRAG": [row["sn"]],
        "NACK_FRAG": [row["sn"]], "HEARTBEAT": [row["hb_first_sn"], row["hb_last_sn"]],
        "ACKNACK": [row["set_base"]], "GAP": [row["gap_start"], row["set_base"]],
    }.get(row["kind"], [])


@pytest.mark.parametrize("capture", PUBLIC_CAPTURES)
def test_walker_agrees_with_tshark_fields_output(shared_captures, tshark, capture):
    """The JSON walk must reproduce, frame by frame, what `tshark -T fields` lists
    independently of the per-submessage grouping: submessage ids, writer entity
    ids, every sequence number, and the VLAN priority."""
    path = shared_captures / capture
    out = subprocess.run(
        [tshark, "-r", str(path), "-Y", "rtps", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
         "-e", "frame.number", "-e", "rtps.sm.id", "-e", "rtps.sm.wrEntityId", "-e", "rtps.sm.seqNumber",
         "-e", "vlan.priority"],
        capture_output=True, text=True, check=True).stdout
    rows = collections.defaultdict(list)
    for r in oracle_rows(path):
        rows[r["frame"]].append(r)
    frames = 0
    for line in out.splitlines():
        frame, ids, wr, seq, pcp = line.split("\t")
        frame = int(frame)
        frames += 1
        mine = rows.pop(frame, [])
        assert [int(i, 16) for i in ids.split(",")] == [_sm_id(r["kind"]) for r in mine], f"{capture} frame {frame}: submessage ids"
        assert (wr.split(",") if wr else []) == ["0x" + r["writer_id"][-8:] for r in mine if r["writer_id"]], \
            f"{capture} frame {frame}: writer entity ids"
        assert ([int(s) for s in seq.split(",")] if seq else []) == [s for r in mine for s in _seq_numbers(r)], \
            f"{capture} frame {frame}: sequence numbers"
        want_pcp = int(pcp.split(",")[0]) if pcp else None
        assert all(r["pcp"] == want_pcp for r in mine), f"{capture} frame {frame}: pcp"
    assert not rows, f"{capture}: walker rows for frames tshark -T fields does not show: {sorted(rows)[:10]}"
    assert frames > 0


def _sm_id(kind: str) -> int:
    if kind.startswith(("VENDOR(", "UNKNOWN(")):
        return int(kind[kind.index("(") + 1:-1], 16)
    return {v: k for k, v in tshark_rows.KIND_BY_ID.items()}[kind]


# Per-kind submessage counts of the public captures, as tshark 4.0.17 reports them
# (cross-checked with `tshark -T fields -e rtps.sm.id`, see the test above).
PUBLIC_KIND_COUNTS = {
    "cyclone-talker-listener-loopback.pcapng": {"INFO_TS": 75, "DATA": 75, "INFO_DST": 39, "HEARTBEAT": 41, "ACKNACK": 29},
    "fastdds-vlan-pcp-ipfrag.pcapng": {"INFO_TS": 691, "DATA": 691, "INFO_DST": 1299, "HEARTBEAT": 770, "ACKNACK": 746},
    "cyclone-interop.pcapng": {"DATA": 539, "HEARTBEAT": 1288, "INFO_DST": 1160, "ACKNACK": 1190, "INFO_TS": 144},
    "cyclone-datafrag.pcapng": {"DATA": 6565, "HEARTBEAT": 1942, "INFO_DST": 1019, "ACKNACK": 1049, "INFO_TS": 144,
                                "DATA_FRAG": 90, "HEARTBEAT_FRAG": 72},
}


@pytest.mark.parametrize("capture", PUBLIC_CAPTURES)
def test_walker_kind_counts(shared_captures, tshark, capture):
    counts = collections.Counter(r["kind"] for r in oracle_rows(shared_captures / capture))
    assert dict(counts) == PUBLIC_KIND_COUNTS[capture]


P1 = bytes.fromhex("010f0000aaaaaaaa00000001")
P2 = bytes.fromhex("01100000bbbbbbbb00000002")
P3 = bytes.fromhex("01100000cccccccc00000003")
Z = "0" * 24


def _synthetic_capture(path, le: bool) -> list[tuple[int, int, dict]]:
    """Writes a capture covering what real captures lack; returns (frame, index, expected fields)."""
    cap = synth.Pcap()
    exp: list[tuple[int, int, dict]] = []

    def send(rtps: bytes, tags=(), ident=1, frag=None, icmp=False):
        l4 = synth.udp(7410, 7411, rtps)
        if icmp:  # port unreachable quoting the datagram
            inner = synth.ipv4_fragments("10.0.0.2", "10.0.0.1", l4, ident)[0]
            ips = synth.ipv4_fragments("10.0.0.1", "10.0.0.2", struct.pack("!BBHI", 3, 3, 0, 0) + inner, ident, proto=1)
        else:
            ips = synth.ipv4_fragments("10.0.0.1", "10.0.0.2", l4, ident, frag)
        for ip in ips:
            frame = cap.add(synth.ethernet(ip, 0x0800, list(tags)))
        return frame

    h1, h2 = synth.rtps_header(P1, 0x010F), synth.rtps_header(P2)
    f = send(h1 + synth.info_ts(100, 0, le) + synth.data(0, 0x1102, 5, b"\0\1\0\0" + b"x" * 12, le)
             + synth.heartbeat(0, 0x1102, 1, 5, 7, le), tags=[(0x8100, 5, 30)])
    exp += [(f, 0, dict(kind="INFO_TS", guid_prefix=P1.hex(), pcp=5, vlan_id=30)),
            (f, 1, dict(kind="DATA", sn=5, sample_size=16, writer_id=P1.hex() + "00001102", reader_id=Z + "00000000")),
            (f, 2, dict(kind="HEARTBEAT", hb_first_sn=1, hb_last_sn=5, count=7, sn=None, pcp=5))]
    # 802.1ad outer tag then 802.1Q: the outer one counts. ACKNACK/NACK_FRAG come from the reader.
    f = send(h2 + synth.info_dst(P1, le) + synth.acknack(0x1107, 0x1102, 6, 3, 8, le, bits=5)
             + synth.nack_frag(0x1107, 0x1102, 9, 2, 4, 3, le), tags=[(0x88A8, 3, 100), (0x8100, 6, 30)])
    exp += [(f, 0, dict(kind="INFO_DST", guid_prefix=P2.hex(), pcp=3, vlan_id=100)),
            (f, 1, dict(kind="ACKNACK", set_base=6, set_num_bits=3, count=8,
                        writer_id=P1.hex() + "00001102", reader_id=P2.hex() + "00001107")),
            (f, 2, dict(kind="NACK_FRAG", sn=9, set_base=2, set_num_bits=4, count=3,
                        writer_id=P1.hex() + "00001102", reader_id=P2.hex() + "00001107"))]
    # Two 802.1Q tags; GAP, HEARTBEAT_FRAG, an undecoded vendor submessage, INFO_SRC.
    f = send(h1 + synth.gap(0, 0x1102, 3, 6, 2, le) + synth.heartbeat_frag(0, 0x1102, 9, 12, 4, le)
             + synth.vendor(0x80, b"\1\2\3\4", le) + synth.info_src(P3, 0x0110, le)
             + synth.data(0, 0x2202, 77, b"\0\1\0\0abcd", le), tags=[(0x8100, 1, 10), (0x8100, 2, 20)])
    exp += [(f, 0, dict(kind="GAP", gap_start=3, set_base=6, set_num_bits=2, writer_id=P1.hex() + "00001102", pcp=1, vlan_id=10)),
            (f, 1, dict(kind="HEARTBEAT_FRAG", sn=9, last_fragment_num=12, count=4)),
            (f, 2, dict(kind="VENDOR(0x80)", guid_prefix=P1.hex(), writer_id=None)),
            (f, 3, dict(kind="INFO_SRC", guid_prefix=P3.hex())),
            (f, 4, dict(kind="DATA", sn=77, sample_size=8, guid_prefix=P3.hex(), writer_id=P3.hex() + "00002202"))]
    # Two IP fragments: rows belong to the completing frame only.
    f = send(h1 + synth.pad(le) + synth.info_reply_ip4("10.0.0.9", 7412, le) + synth.vendor(0x81, b"z" * 8, le)
             + synth.data_frag(0, 0x3302, 4, 3, 2, 1000, 5000, b"\0" * 2000, le), ident=77, frag=1480)
    exp += [(f - 1, 0, None),
            (f, 0, dict(kind="PAD")), (f, 1, dict(kind="INFO_REPLY_IP4")), (f, 2, dict(kind="VENDOR(0x81)", sn=None)),
            (f, 3, dict(kind="DATA_FRAG", sn=4, fragment_starting_num=3, frags_in_submsg=2, fragment_size=1000,
                        sample_size=5000, writer_id=P1.hex() + "00003302"))]
    # SEDP publication in one DATA, then the same sample in two DATA_FRAGs.
    sedp = synth.sedp_publication(0x3302, "rt/chatter", "std_msgs::msg::dds_::String_", P1, le)
    names = dict(endpoint_topic_raw="rt/chatter", endpoint_type_raw="std_msgs::msg::dds_::String_")
    f = send(h1 + sedp)
    exp += [(f, 0, dict(kind="DATA", sn=1, sample_size=len(sedp) - 24, writer_id=P1.hex() + "000003c2", **names))]
    payload = sedp[24:]
    for i, start in enumerate(range(0, len(payload), 64)):
        f = send(h1 + synth.data_frag(0x3C7, 0x3C2, 2, i + 1, 1, 64, len(payload), payload[start:start + 64], le), ident=100 + i)
        last = start + 64 >= len(payload)
        exp += [(f, 0, dict(kind="DATA_FRAG", sn=2, fragment_starting_num=i + 1, sample_size=len(payload),
                            **(names if last else dict(endpoint_topic_raw=None, endpoint_type_raw=None))))]
    # IPv6.
    rtps = h1 + synth.data(0, 0x1102, 9, b"\0\1\0\0abcd", le)
    f = cap.add(synth.ethernet(synth.ipv6(b"\xfe\x80" + b"\0" * 13 + b"\1", b"\xff\x02" + b"\0" * 13 + b"\1",
                                          synth.udp(7410, 7411, rtps)), 0x86DD))
    exp += [(f, 0, dict(kind="DATA", sn=9, sample_size=8))]
    # Last submessage with octetsToNextHeader 0: it extends to the end of the message.
    body = struct.pack("<HH" if le else ">HH", 0, 16) + synth.eid(0) + synth.eid(0x1102) + synth.sn(10, le) + b"\0\1\0\0" + b"y" * 8
    f = send(h1 + synth.info_ts(1, 0, le) + synth.submessage(synth.DATA, 0x04, body, le, octets_to_next=0), ident=9)
    exp += [(f, 0, dict(kind="INFO_TS")), (f, 1, dict(kind="DATA", sn=10, sample_size=12, octets_to_next_header=0))]
    # RTPS quoted by an ICMP error is not traffic.
    f = send(h1 + synth.heartbeat(0, 0x1102, 1, 3, 1, le), ident=11, icmp=True)
    exp += [(f, 0, None)]
    cap.write(path)
    return exp


@pytest.mark.parametrize("byte_order", ["little", "big"])
def test_walker_on_synthetic_capture(tmp_path, tshark, byte_order):
    """Every value is known by construction (tests/oracle/synth.py)."""
    path = tmp_path / f"synthetic-{byte_order}.pcap"
    expected = _synthetic_capture(path, le=byte_order == "little")
    stats = tshark_rows.WalkStats()
    rows = by_key(tshark_rows.tshark_rows(str(path), stats=stats))
    for frame, index, fields in expected:
        if fields is None:
            assert (frame, index) not in rows, f"frame {frame}: expected no row, got {rows.get((frame, index))}"
            continue
        assert (frame, index) in rows, f"no row for frame {frame} submsg {index}"
        row = rows[(frame, index)]
        wrong = {k: (row.get(k), v) for k, v in fields.items() if row.get(k) != v}
        assert not wrong, f"frame {frame} submsg {index}: (walker, expected) = {wrong}"
    assert set(rows) == {(f, i) for f, i, fields in expected if fields is not None}
    assert stats.skipped == {"rtps quoted in icmp": 1}


def test_split_packets_rejects_truncated_output():
    lines = ["[\n", "  {\n", '    "_source": {"layers": {}}\n', "  },\n", "  {\n", '    "_source": {\n']
    it = tshark_rows.split_packets(lines)
    assert next(it) == {"_source": {"layers": {}}}
    with pytest.raises(tshark_rows.TsharkShapeError):
        next(it)


MUTATIONS = [
    # (kind of row to mutate, field, new value, field name compare.py must report)
    ("DATA", "kind", "GAP", "kind"),
    ("DATA", "writer_id", "0" * 24 + "00ab0102", "writer_entity"),
    ("DATA", "sn", 123456, "sn"),
    ("DATA", "sample_size", 1, "sample_size"),
    ("DATA_FRAG", "fragment_starting_num", 99, "fragment_starting_num"),
    ("DATA_FRAG", "frags_in_submsg", 99, "frags_in_submsg"),
    ("DATA_FRAG", "fragment_size", 99, "fragment_size"),
    ("DATA_FRAG", "sample_size", 99, "sample_size"),
    ("HEARTBEAT", "hb_first_sn", 99, "hb_first_sn"),
    ("HEARTBEAT", "hb_last_sn", 99, "hb_last_sn"),
    ("HEARTBEAT", "sn", 5, "sn"),
    ("ACKNACK", "set_base", 99, "set_base"),
    ("ACKNACK", "reader_id", "0" * 24 + "00ab0107", "reader_entity"),
    ("HEARTBEAT_FRAG", "last_fragment_num", 99, "last_fragment_num"),
    ("DATA", "endpoint_topic_raw", "rt/other", "endpoint_topic_raw"),
    ("INFO_TS", "pcp", 6, "pcp"),
]


@pytest.mark.parametrize("kind,field,value,reported", MUTATIONS, ids=[f"{k}-{f}" for k, f, _, _ in MUTATIONS])
def test_compare_reports_each_mutated_field(shared_captures, tshark, kind, field, value, reported):
    theirs = oracle_rows(shared_captures / "cyclone-datafrag.pcapng")
    assert compare.compare_rows(copy.deepcopy(theirs), theirs).ok
    ours = copy.deepcopy(theirs)
    target = next(r for r in ours if r["kind"] == kind and r.get(field) != value
                  and (field != "endpoint_topic_raw" or r["endpoint_topic_raw"] is not None))
    target[field] = value
    cmp = compare.compare_rows(ours, theirs)
    assert not cmp.ok
    fields = {(d.frame, d.field) for d in cmp.differences}
    assert (target["frame"], reported) in fields, cmp.summary()
    summary = cmp.summary()
    assert f"frame {target['frame']}" in summary and reported in summary


def test_compare_reports_missing_and_extra_submessages(shared_captures, tshark):
    theirs = oracle_rows(shared_captures / "cyclone-talker-listener-loopback.pcapng")
    ours = copy.deepcopy(theirs[1:]) + [dict(theirs[0], frame=10_000)]
    cmp = compare.compare_rows(ours, theirs)
    assert (theirs[0]["frame"], theirs[0]["submsg_index"], theirs[0]["kind"]) in cmp.only_tshark
    assert (10_000, theirs[0]["submsg_index"], theirs[0]["kind"]) in cmp.only_ours
    assert not cmp.ok
    assert not compare.compare_rows([], []).ok, "comparing nothing must not count as agreement"


# =============================================================================
# The oracle test proper: ddscope dissect vs tshark
# =============================================================================

def ddscope_rows(ddscope, capture) -> list[dict]:
    cp = ddscope("dissect", capture, "--format", "jsonl")
    rows = []
    for n, line in enumerate(cp.stdout.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as e:
                raise AssertionError(f"ddscope dissect {capture}: stdout line {n} is not JSON: {e}: {line[:200]}")
    return rows


def assert_agreement(ddscope, capture, label: str) -> compare.Comparison:
    cmp = compare.compare_rows(ddscope_rows(ddscope, capture), oracle_rows(capture), label=label)
    print("\n" + cmp.summary(max_diffs=30))
    assert cmp.ok, "\n" + cmp.summary(max_diffs=30)
    return cmp


@pytest.mark.parametrize("capture", PUBLIC_CAPTURES)
def test_dissect_agrees_with_tshark_on_public_capture(ddscope, shared_captures, tshark, capture):
    assert_agreement(ddscope, shared_captures / capture, capture)


@pytest.mark.parametrize("byte_order", ["little", "big"])
def test_dissect_agrees_with_tshark_on_synthetic_capture(ddscope, tshark, tmp_path, byte_order):
    """INFO_SRC, GAP, NACK_FRAG, vendor submessages, stacked VLAN tags, IPv6,
    big-endian submessages and SEDP in DATA_FRAG, which real captures lack."""
    path = tmp_path / f"synthetic-{byte_order}.pcap"
    _synthetic_capture(path, le=byte_order == "little")
    cmp = assert_agreement(ddscope, path, path.name)
    for kind in ("GAP", "NACK_FRAG", "INFO_SRC", "VENDOR(0x80)", "DATA_FRAG"):
        assert cmp.kinds.get(kind), f"{path.name}: no {kind} compared"


def _vendors(tshark_path: str, capture: pathlib.Path) -> set[str]:
    out = subprocess.run([tshark_path, "-r", str(capture), "-Y", "rtps", "-T", "fields", "-E", "occurrence=f",
                          "-e", "rtps.vendorId"], capture_output=True, text=True, check=True).stdout
    return {v.strip() for v in out.split()}


def test_project_made_captures_cover_cyclone_and_fastdds(tshark):
    """The lab commits real captures under examples/captures; both vendors must be there."""
    captures = project_captures()
    vendors = {c.relative_to(REPO).as_posix(): _vendors(tshark, c) for c in captures}
    have = set().union(*vendors.values()) if vendors else set()
    missing = [name for vid, name in ((VENDOR_CYCLONE, "Cyclone DDS (0x0110)"), (VENDOR_FASTDDS, "Fast DDS (0x010f)"))
               if vid not in have]
    assert not missing, (f"no project-made capture from {', '.join(missing)} under {EXAMPLES.relative_to(REPO)}; "
                         f"found: {vendors or 'nothing'}")


@pytest.mark.parametrize("capture", project_captures(), ids=lambda p: p.relative_to(EXAMPLES).as_posix())
def test_dissect_agrees_with_tshark_on_project_capture(ddscope, tshark, capture):
    assert_agreement(ddscope, capture, capture.relative_to(REPO).as_posix())


@pytest.fixture(scope="module")
def fresh_captures(tmp_path_factory):
    """Small-sample, large-sample and repair ddsperf captures made now in two network namespaces."""
    assert have_root(), "the fresh-capture oracle test needs root (network namespaces, tcpdump); CI runs as root"
    for tool in ("ddsperf", "tcpdump", "ip", "editcap"):
        require_tool(tool)
    out = tmp_path_factory.mktemp("ddsperf")
    cp = subprocess.run(["bash", str(MAKE_CAPTURE), str(out), "all"], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, f"make_capture.sh failed ({cp.returncode}):\n{cp.stderr}"
    print("\n" + cp.stderr.strip())
    return out


FRESH = {  # capture -> submessage kinds it must exercise
    "ddsperf-small.pcapng": ("DATA", "HEARTBEAT", "ACKNACK", "INFO_DST"),
    "ddsperf-small.pcap": ("DATA", "HEARTBEAT", "ACKNACK", "INFO_DST"),
    "ddsperf-large.pcapng": ("DATA_FRAG", "HEARTBEAT_FRAG"),
    "ddsperf-large.pcap": ("DATA_FRAG", "HEARTBEAT_FRAG"),
    "ddsperf-repair.pcapng": ("DATA_FRAG", "NACK_FRAG"),
}


@pytest.mark.parametrize("name", list(FRESH))
def test_dissect_agrees_with_tshark_on_fresh_ddsperf_capture(ddscope, tshark, fresh_captures, name):
    cmp = assert_agreement(ddscope, fresh_captures / name, f"fresh {name}")
    missing = [k for k in FRESH[name] if not cmp.kinds.get(k)]
    assert not missing, f"fresh {name} has no {missing}: the capture no longer exercises what it is for"
