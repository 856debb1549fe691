"""A clock that is not the reference's, applied to a pcapng capture: a small rewriter written from
the pcapng specification (draft-ietf-opsawg-pcapng), independent of ddscope's reader.

Every Enhanced Packet Block's time stamp t becomes t + offset + drift * (t - t0) + (step if t >= t0 +
step_at), t0 the capture's first time stamp. Interfaces' if_tsresol is honoured (microseconds by
default). Used by tests/test_clocks.py for drift and steps (editcap -t does offsets only).

    python3 tests/pcapng_warp.py IN OUT --offset-ns N --drift-ppm P [--step-ns S --step-at-s T]
"""
import argparse
import gzip
import struct


def _resolution(options: bytes, endian: str) -> int:
    """Time stamp units per second from an IDB's options."""
    i = 0
    while i + 4 <= len(options):
        code, length = struct.unpack(endian + "HH", options[i:i + 4])
        if code == 0:
            break
        if code == 9 and length >= 1:
            v = options[i + 4]
            return 2 ** (v & 0x7F) if v & 0x80 else 10 ** v
        i += 4 + ((length + 3) & ~3)
    return 1_000_000


def warp(src: str, dst: str, offset_ns: int = 0, drift_ppm: float = 0.0, step_ns: int = 0, step_at_s: float = 0.0):
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rb") as f:
        data = bytearray(f.read())
    endian = "<"
    res = []
    t0 = None
    i = 0
    n = 0
    while i + 12 <= len(data):
        btype = struct.unpack_from(endian + "I", data, i)[0]
        if btype == 0x0A0D0D0A:
            magic = data[i + 8:i + 12]
            endian = "<" if magic == b"\x4d\x3c\x2b\x1a" else ">"
            res = []
        length = struct.unpack_from(endian + "I", data, i + 4)[0]
        if length < 12 or i + length > len(data):
            raise ValueError(f"{src}: block at byte {i} has length {length}")
        if btype == 1:
            res.append(_resolution(bytes(data[i + 16:i + length - 4]), endian))
        elif btype == 6:
            iface, hi, lo = struct.unpack_from(endian + "III", data, i + 8)
            per_s = res[iface]
            ts = (hi << 32) | lo
            t_ns = ts * 1_000_000_000 // per_s
            if t0 is None:
                t0 = t_ns
            new = t_ns + offset_ns + round(drift_ppm * 1e-6 * (t_ns - t0))
            if step_ns and t_ns - t0 >= step_at_s * 1e9:
                new += step_ns
            ts2 = new * per_s // 1_000_000_000
            struct.pack_into(endian + "II", data, i + 12, ts2 >> 32, ts2 & 0xFFFFFFFF)
            n += 1
        i += length
    with open(dst, "wb") as f:
        f.write(data)
    return n


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--offset-ns", type=int, default=0)
    ap.add_argument("--drift-ppm", type=float, default=0.0)
    ap.add_argument("--step-ns", type=int, default=0)
    ap.add_argument("--step-at-s", type=float, default=0.0)
    a = ap.parse_args()
    print(warp(a.src, a.dst, a.offset_ns, a.drift_ppm, a.step_ns, a.step_at_s), "packets rewritten")
