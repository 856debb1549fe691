#!/usr/bin/env python3
"""Seeds fuzz/corpus/read_trace from a real trace: one input per mode of the
read_trace target (fuzz/fuzz_targets/read_trace.rs): the metadata file as
recorded, its TSDL text to be cut into packets (little- and big-endian
framing), and its TSDL text as a plain-text metadata file; each with the
trace's first stream file.

    python3 fuzz/seed_trace.py TRACE_DIR fuzz/corpus/read_trace

TRACE_DIR is a `ust/uid/<uid>/64-bit` directory (or a session directory
holding one). Inputs longer than the target's u16 metadata length are cut.
"""
import pathlib
import struct
import sys


def tsdl_text(meta: bytes) -> bytes:
    if meta[:4] not in (b"\x57\x1d\xd1\x75", b"\x75\xd1\x1d\x57"):
        return meta
    le = meta[:4] == b"\x57\x1d\xd1\x75"
    fmt = "<II" if le else ">II"
    out, off = b"", 0
    while off + 37 <= len(meta):
        content, size = struct.unpack_from(fmt, meta, off + 24)
        out += meta[off + 37: off + content // 8]
        off += size // 8
    return out


def main():
    src, dst = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    trace = next(p.parent for p in sorted(src.rglob("metadata")) if "kernel" not in p.parts)
    meta = (trace / "metadata").read_bytes()
    stream = next(p for p in sorted(trace.iterdir()) if p.name != "metadata" and not p.name.startswith(".") and p.is_file()).read_bytes()
    text = tsdl_text(meta)
    dst.mkdir(parents=True, exist_ok=True)
    for name, mode, m in [("as-recorded", 0, meta), ("text-packets-le", 1, text), ("text-packets-be", 5, text), ("text", 2, text)]:
        m = m[:0xFFFF]
        (dst / f"seed-{name}").write_bytes(bytes([mode]) + struct.pack("<H", len(m)) + m + stream[:1 << 16])
        print(dst / f"seed-{name}")


if __name__ == "__main__":
    main()
