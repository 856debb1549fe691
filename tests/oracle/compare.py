#!/usr/bin/env python3
"""Compares `ddscope dissect --format jsonl` rows with tshark_rows.py rows.

    compare.py OURS.jsonl TSHARK.jsonl [-n N] [--label NAME]

Rows are aligned by (frame, submsg_index). Per submessage the fields of
FIELDS are compared (see docs/oracle.md for why each one and when it
applies); per frame the outermost VLAN PCP and VLAN id; per capture the set
of (topic, type) pairs announced by SEDP. Prints an agreement summary and the
first N differences, each naming frame, submessage index, field, our value
and tshark's. Exit status: 0 on full agreement, 1 on any difference, 2 on
unreadable input.

Importable: `compare_rows(ours, theirs)` returns a `Comparison`.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable

Row = dict


def _entity(guid):
    """Entity id part (last 8 hex digits) of a 32-hex-digit GUID."""
    return None if guid is None else str(guid).lower()[-8:]


def _kind_is(*kinds: str) -> Callable[[Row, Row], bool]:
    return lambda ours, theirs: theirs.get("kind") in kinds


def _always(ours: Row, theirs: Row) -> bool:
    return True


@dataclass(frozen=True)
class FieldRule:
    name: str                                  # name in the summary and in differences
    get: Callable[[Row], object]               # value extracted from a row
    applies: Callable[[Row, Row], bool] = _always
    tshark_only: bool = False                  # compare only where tshark has a value


def _key(name: str) -> Callable[[Row], object]:
    return lambda row: row.get(name)


# The acceptance fields first, then the other kind-specific fields of
# the row format (all defined by the RTPS spec, so tshark is an oracle for them).
FIELDS: tuple[FieldRule, ...] = (
    FieldRule("kind", _key("kind")),
    FieldRule("writer_entity", lambda r: _entity(r.get("writer_id"))),
    FieldRule("sn", _key("sn")),
    FieldRule("fragment_starting_num", _key("fragment_starting_num")),
    FieldRule("frags_in_submsg", _key("frags_in_submsg")),
    FieldRule("fragment_size", _key("fragment_size")),
    # tshark reports sampleSize on DATA_FRAG; on DATA tshark_rows derives it
    # from octetsToNextHeader (see docs/oracle.md); elsewhere it has none.
    FieldRule("sample_size", _key("sample_size"), tshark_only=True),
    FieldRule("hb_first_sn", _key("hb_first_sn")),
    FieldRule("hb_last_sn", _key("hb_last_sn")),
    FieldRule("set_base", _key("set_base"), _kind_is("ACKNACK", "NACK_FRAG", "GAP")),
    FieldRule("gap_start", _key("gap_start")),
    FieldRule("endpoint_topic_raw", _key("endpoint_topic_raw")),
    FieldRule("endpoint_type_raw", _key("endpoint_type_raw")),
    FieldRule("reader_entity", lambda r: _entity(r.get("reader_id"))),
    FieldRule("guid_prefix", lambda r: None if r.get("guid_prefix") is None else str(r["guid_prefix"]).lower()),
    FieldRule("count", _key("count")),
    FieldRule("set_num_bits", _key("set_num_bits")),
    FieldRule("last_fragment_num", _key("last_fragment_num")),
)
FRAME_FIELDS = ("pcp", "vlan_id")


def _norm(v):
    """Numbers may arrive as int or decimal string; hex strings compare case-blind."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, str):
        s = v.strip()
        if s.isdigit() or (s.startswith("-") and s[1:].isdigit()):
            return int(s)
        return s
    return v


@dataclass
class Difference:
    frame: int | None
    submsg_index: int | None
    field: str
    ours: object
    tshark: object

    def __str__(self) -> str:
        where = "capture" if self.frame is None else (
            f"frame {self.frame}" + ("" if self.submsg_index is None else f" submsg {self.submsg_index}"))
        return f"{where} {self.field}: ours {self.ours!r} tshark {self.tshark!r}"


@dataclass
class Comparison:
    label: str = ""
    rows_ours: int = 0
    rows_tshark: int = 0
    rows_compared: int = 0
    only_ours: list[tuple[int, int, str]] = field(default_factory=list)
    only_tshark: list[tuple[int, int, str]] = field(default_factory=list)
    field_counts: dict[str, list[int]] = field(default_factory=dict)  # name -> [compared, agree]
    frames_compared: int = 0
    sedp_ours: set[tuple[str, str]] = field(default_factory=set)
    sedp_tshark: set[tuple[str, str]] = field(default_factory=set)
    differences: list[Difference] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)  # kinds of the aligned rows (tshark's)

    @property
    def n_differences(self) -> int:
        return len(self.differences)

    @property
    def ok(self) -> bool:
        return not self.differences and self.rows_compared > 0

    def _count(self, name: str, agree: bool) -> None:
        c = self.field_counts.setdefault(name, [0, 0])
        c[0] += 1
        c[1] += agree

    def summary(self, max_diffs: int = 20) -> str:
        head = f"oracle {self.label}: " if self.label else "oracle: "
        verdict = "AGREE" if self.ok else ("NOTHING COMPARED" if not self.rows_compared else
                                           f"{self.n_differences} DIFFERENCES")
        lines = [
            f"{head}{verdict} (ddscope dissect vs tshark 4.0 RTPS dissector)",
            f"  submessages: ours {self.rows_ours}, tshark {self.rows_tshark}, aligned {self.rows_compared}, "
            f"only ours {len(self.only_ours)}, only tshark {len(self.only_tshark)}",
            "  kinds: " + (", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items())) or "none"),
            f"  {'field':<22}{'compared':>10}{'agree':>10}",
        ]
        for rule in FIELDS:
            compared, agree = self.field_counts.get(rule.name, [0, 0])
            lines.append(f"  {rule.name:<22}{compared:>10}{agree:>10}")
        for name in FRAME_FIELDS:
            compared, agree = self.field_counts.get(name, [0, 0])
            lines.append(f"  {name + ' (per frame)':<22}{compared:>10}{agree:>10}")
        common = self.sedp_ours & self.sedp_tshark
        lines.append(f"  SEDP (topic, type) pairs: ours {len(self.sedp_ours)}, tshark {len(self.sedp_tshark)}, "
                     f"common {len(common)}")
        if self.differences:
            shown = self.differences[:max_diffs]
            lines.append(f"  first {len(shown)} of {self.n_differences} differences:")
            lines += [f"    {d}" for d in shown]
        return "\n".join(lines)


def _index(rows: Iterable[Row], side: str, cmp: Comparison) -> dict[tuple[int, int], Row]:
    out: dict[tuple[int, int], Row] = {}
    for row in rows:
        try:
            key = (int(row["frame"]), int(row["submsg_index"]))
        except (KeyError, TypeError, ValueError):
            cmp.differences.append(Difference(row.get("frame"), row.get("submsg_index"), "row key",
                                              row if side == "ours" else None, row if side == "tshark" else None))
            continue
        if key in out:
            cmp.differences.append(Difference(key[0], key[1], f"duplicate row on {side} side",
                                              row.get("kind") if side == "ours" else None,
                                              row.get("kind") if side == "tshark" else None))
            continue
        out[key] = row
    return out


def compare_rows(ours: Iterable[Row], theirs: Iterable[Row], label: str = "") -> Comparison:
    """Compares our rows with tshark's (`theirs`); see the module docstring."""
    cmp = Comparison(label=label)
    a = _index(ours, "ours", cmp)
    b = _index(theirs, "tshark", cmp)
    cmp.rows_ours, cmp.rows_tshark = len(a), len(b)

    for key in sorted(a.keys() - b.keys()):
        cmp.only_ours.append((key[0], key[1], a[key].get("kind")))
        cmp.differences.append(Difference(key[0], key[1], "submessage only in ours", a[key].get("kind"), None))
    for key in sorted(b.keys() - a.keys()):
        cmp.only_tshark.append((key[0], key[1], b[key].get("kind")))
        cmp.differences.append(Difference(key[0], key[1], "submessage only in tshark", None, b[key].get("kind")))

    # Per frame: each of our submessages must carry tshark's value for its frame;
    # a frame counts once, as agreeing only if all its submessages agree.
    frame_state: dict[str, dict[int, bool]] = {f: {} for f in FRAME_FIELDS}
    for key in sorted(a.keys() & b.keys()):
        ro, rt = a[key], b[key]
        cmp.rows_compared += 1
        cmp.kinds[rt.get("kind")] = cmp.kinds.get(rt.get("kind"), 0) + 1
        for rule in FIELDS:
            if not rule.applies(ro, rt):
                continue
            vo, vt = _norm(rule.get(ro)), _norm(rule.get(rt))
            if vt is None and (rule.tshark_only or vo is None):
                continue
            agree = vo == vt
            cmp._count(rule.name, agree)
            if not agree:
                cmp.differences.append(Difference(key[0], key[1], rule.name, vo, vt))
                if rule.name == "kind":
                    break  # the other fields of a misclassified submessage are noise
        for name in FRAME_FIELDS:
            vo, vt = _norm(ro.get(name)), _norm(rt.get(name))
            if vo is None and vt is None:
                continue
            state = frame_state[name]
            if vo != vt and state.get(key[0], True):
                cmp.differences.append(Difference(key[0], key[1], name, vo, vt))
                state[key[0]] = False
            state.setdefault(key[0], True)
    for name in FRAME_FIELDS:
        for agree in frame_state[name].values():
            cmp._count(name, agree)
    cmp.frames_compared = len({k[0] for k in a.keys() & b.keys()})

    for rows, dest in ((a.values(), cmp.sedp_ours), (b.values(), cmp.sedp_tshark)):
        for row in rows:
            if row.get("endpoint_topic_raw") is not None or row.get("endpoint_type_raw") is not None:
                dest.add((row.get("endpoint_topic_raw"), row.get("endpoint_type_raw")))
    for pair in sorted(cmp.sedp_ours - cmp.sedp_tshark, key=str):
        cmp.differences.append(Difference(None, None, "SEDP (topic, type) only in ours", pair, None))
    for pair in sorted(cmp.sedp_tshark - cmp.sedp_ours, key=str):
        cmp.differences.append(Difference(None, None, "SEDP (topic, type) only in tshark", None, pair))
    cmp.differences.sort(key=lambda d: (not isinstance(d.frame, int), d.frame if isinstance(d.frame, int) else 0,
                                        d.submsg_index if isinstance(d.submsg_index, int) else -1))
    return cmp


def load_jsonl(path: str) -> list[Row]:
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON: {e}") from None
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ours", help="ddscope dissect --format jsonl output")
    ap.add_argument("tshark", help="tshark_rows.py output")
    ap.add_argument("-n", "--max-diffs", type=int, default=20, help="differences to list (default 20)")
    ap.add_argument("--label", default="", help="name printed in the summary (e.g. the capture)")
    args = ap.parse_args(argv)
    try:
        ours, theirs = load_jsonl(args.ours), load_jsonl(args.tshark)
    except (OSError, ValueError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    cmp = compare_rows(ours, theirs, label=args.label)
    print(cmp.summary(args.max_diffs))
    return 0 if cmp.ok else 1


if __name__ == "__main__":
    sys.exit(main())
