#!/usr/bin/env python3
"""Sends every frame of a classic pcap file (as tests/hostile/hostile.py writes
them) out of a network interface through an AF_PACKET socket, as fast as the
socket takes them or at --pps. Run inside a network namespace (`ip netns exec
NS replay.py FILE IFACE`): the forged traffic then never leaves the test's
own veth pair.

Prints one line: frames sent, seconds, frames per second, send errors.
"""
from __future__ import annotations

import argparse
import socket
import struct
import sys
import time


def frames(path: str):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        if magic not in (0xA1B2C3D4, 0xA1B23C4D):
            raise SystemExit(f"{path}: not a little-endian classic pcap file (magic {magic:#x})")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            _, _, incl, _ = struct.unpack("<IIII", h)
            data = f.read(incl)
            if len(data) < incl:
                return
            yield data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pcap")
    ap.add_argument("iface")
    ap.add_argument("--pps", type=float, default=0, help="frames per second (0 = as fast as possible)")
    a = ap.parse_args()
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    s.bind((a.iface, 0))
    sent = errors = 0
    t0 = time.perf_counter()
    for fr in frames(a.pcap):
        if a.pps:
            due = t0 + sent / a.pps
            while time.perf_counter() < due:
                pass
        try:
            s.send(fr)
            sent += 1
        except OSError:
            errors += 1  # ENOBUFS when the queue is full: counted, the frame is not retried
    dt = time.perf_counter() - t0
    print(f"replay: {sent} frames in {dt:.2f} s ({sent / max(dt, 1e-9):.0f}/s), {errors} send errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
