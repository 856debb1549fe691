#!/usr/bin/env python3
"""`ddscope serve` under OTLP and ingest floods (issue 23, items 2, 3, 11):
each scenario starts a fresh `serve` on loopback, sends its flood, and
reports the server's peak RSS (VmHWM), the wall time and what the server
answered. A server passing --ceiling-mb is killed (reported as "> ceiling").

    python3 bench/soak_otlp.py [--bin PATH] [--ceiling-mb 6000] [--only NAME,...]

The floods are forged byte by byte by tests/hostile/otlp.py (protobuf wire
format, a hand-written HTTP/2 client for gRPC). Prints one Markdown row per
scenario.
"""
import argparse
import json
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "hostile"))
import otlp  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, exe, ceiling_mb, *args, grpc=False):
        self.port = free_port()
        self.grpc = free_port() if grpc else None
        cmd = [exe, "serve", "--listen", f"127.0.0.1:{self.port}", *args]
        if grpc:
            cmd += ["--otlp-grpc", f"127.0.0.1:{self.grpc}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.killed = False
        self.peak_kb = 0
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                assert time.time() < deadline, "serve did not start"
                time.sleep(0.05)
        self.stop_watch = False
        threading.Thread(target=self.watch, args=(ceiling_mb,), daemon=True).start()

    def status(self, key):
        try:
            for line in open(f"/proc/{self.proc.pid}/status"):
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def watch(self, ceiling_mb):
        while not self.stop_watch and self.proc.poll() is None:
            rss = self.status("VmRSS")
            self.peak_kb = max(self.peak_kb, self.status("VmHWM"), rss)
            if rss > ceiling_mb * 1024:
                self.killed = True
                self.proc.kill()
                return
            time.sleep(0.02)

    def post(self, path, body, headers, timeout=120):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=body, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return "failed"

    def otlp(self, body, gz=False):
        h = {"Content-Type": "application/x-protobuf"}
        if gz:
            h["Content-Encoding"] = "gzip"
        return self.post("/v1/traces", body, h)

    def finish(self):
        self.peak_kb = max(self.peak_kb, self.status("VmHWM"))
        self.stop_watch = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def grpc_export(port, msg, compressed):
    try:
        c = otlp.H2(port, timeout=120)
    except OSError:
        return "failed"
    try:
        sid = c.start(otlp.TRACES_METHOD, gzip_encoding=compressed)
        c.send(sid, otlp.grpc_message(msg, compressed), end=True, deadline=time.time() + 120)
        return "answered" if c.wait([sid], 120) else "no answer"
    finally:
        c.close()


def summarize(answers):
    out = {}
    for a in answers:
        out[a] = out.get(a, 0) + 1
    return ", ".join(f"{n}× {a}" for a, n in sorted(out.items(), key=str))


FLOOD = 8_380_000


def empty_spans(exe, ceiling):
    raw = otlp.empty_spans_request(FLOOD)
    s = Serve(exe, ceiling)
    a = [s.otlp(otlp.gz(raw), gz=True)]
    s.finish()
    return s, "one 16 MiB request of 8.4 M empty spans, HTTP gzip'd (16 KB)", a


def floods_at_once(exe, ceiling):
    raw = otlp.empty_spans_request(FLOOD)
    packed = otlp.gz(raw)
    s = Serve(exe, ceiling, grpc=True)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(s.otlp(packed, gz=True))) for _ in range(4)]
    threads += [threading.Thread(target=lambda: answers.append(grpc_export(s.grpc, packed, True))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    s.finish()
    return s, "the same, 4 over HTTP and 3 over gRPC at once", answers


def trace_ids(exe, ceiling):
    s = Serve(exe, ceiling)
    per = 20_000
    answers = []
    for k in range(1_000_000 // per):
        spans = [otlp.fast_sample_span(k * per + i, 1_700_000_000_000_000_000 + (k * per + i) * 1000) for i in range(per)]
        answers.append(s.otlp(otlp.traces_request("pc1", spans, seq=k + 1)))
        if s.killed:
            break
    s.finish()
    return s, "10^6 distinct trace ids (50 requests of 20 000 sightings, 10 MB each)", answers


def long_names(exe, ceiling):
    s = Serve(exe, ceiling)
    answers = []
    for i in range(200):
        topic = f"rt/{i:04d}" + "x" * (4 << 20)
        item = {"k": "sample", "w": otlp.writer_guid(i), "sn": 1, "topic": [topic, "T"], "tt": 1, "first": 1, "first_ip": 1,
                "last": 1, "complete": True, "size": 10, "fexp": 0, "fseen": 0, "ipf": 1, "retx": 0, "retx_bytes": 0, "vendor": 272}
        body = json.dumps({"agent": "pc1", "seq": i + 1, "sent_ns": 0, "items": [item], "dropped_items": 0}).encode()
        answers.append(s.post("/api/v1/ingest", body, {"x-ddscope-agent": "pc1", "Content-Type": "application/json"}))
        answers.append(s.otlp(otlp.traces_request("pc2", [otlp.sample_span(otlp.writer_guid(10_000 + i), 1, 1, topic=topic)])))
        if s.killed:
            break
    s.finish()
    return s, "400 topic names of 4 MB (200 JSON batches, 200 OTLP requests)", answers


def unfinished_grpc(exe, ceiling):
    s = Serve(exe, ceiling, grpc=True)
    conns = [otlp.H2(s.grpc, timeout=60) for _ in range(10)]
    prefix = b"\x00" + (16 << 20).to_bytes(4, "big")
    streams = []
    for c in conns:
        for _ in range(16):
            sid = c.start(otlp.TRACES_METHOD)
            c.send(sid, prefix)
            streams.append((c, sid))
    chunk = b"\x00" * (1 << 20)
    deadline = time.time() + 60
    for c, sid in streams:
        c.send(sid, chunk * 15, deadline=min(deadline, time.time() + 0.5))
        if s.killed:
            break
    time.sleep(3)
    for c in conns:
        c.poll(0.5)
    answered = sum(1 for c, sid in streams if sid in c.ended)
    for c in conns:
        c.close()
    s.finish()
    return s, "10 gRPC connections × 16 streams, each a 16 MiB message never finished", [f"{answered} of 160 streams answered"]


SCENARIOS = {"empty": empty_spans, "floods": floods_at_once, "traceids": trace_ids, "names": long_names, "grpc": unfinished_grpc}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "ddscope"))
    ap.add_argument("--ceiling-mb", type=int, default=6000)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    a = ap.parse_args()
    print("| flood | peak RSS MB | wall s | answers |")
    print("|---|---|---|---|")
    for name in a.only.split(","):
        t0 = time.time()
        s, what, answers = SCENARIOS[name](a.bin, a.ceiling_mb)
        peak = f"> {a.ceiling_mb} (killed)" if s.killed else f"{s.peak_kb / 1024:.0f}"
        print(f"| {what} | {peak} | {time.time() - t0:.1f} | {summarize(answers)} |", flush=True)


if __name__ == "__main__":
    main()
