"""OTLP requests forged byte by byte (protobuf wire format, no protobuf
library), and a minimal HTTP/2 client for OTLP/gRPC: enough to send
`ddscope serve` what a Collector or an attacker would, including requests
that never finish.

The field numbers are OpenTelemetry's (opentelemetry-proto v1: trace.proto,
logs.proto, common.proto, resource.proto); the span attributes are the ones
`ddscope agent --send-otlp` writes (crates/monitor/src/stream/otlp.rs).
"""
import gzip
import socket
import struct
import time


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, payload):
    """A length-delimited field (message, string, bytes)."""
    return varint((field << 3) | 2) + varint(len(payload)) + payload


def vi(field, n):
    """A varint field (int64 as two's complement, bool, enum)."""
    return varint(field << 3) + varint(n & 0xFFFFFFFFFFFFFFFF)


def fixed64(field, n):
    return varint((field << 3) | 1) + struct.pack("<Q", n)


def any_str(s):
    return ld(1, s.encode() if isinstance(s, str) else s)


def kv(key, value):
    """A KeyValue: value is str, bool or int."""
    if isinstance(value, bool):
        v = vi(2, int(value))
    elif isinstance(value, int):
        v = vi(3, value)
    else:
        v = any_str(value)
    return ld(1, key.encode()) + ld(2, v)


def resource(agent, seq=None):
    attrs = [kv("service.name", "ddscope-agent"), kv("ddscope.agent", agent)]
    if seq is not None:
        attrs.append(kv("ddscope.seq", seq))
    return b"".join(ld(1, a) for a in attrs)


def trace_id(writer, sn):
    # Any 16 bytes: serve routes nothing by it; distinct per (writer, sn) like the agent's.
    return struct.pack(">QQ", hash((writer, sn)) & 0xFFFFFFFFFFFFFFFF, sn & 0xFFFFFFFFFFFFFFFF)


def sample_span(writer, sn, t_ns, topic=None, type_name="std_msgs::msg::dds_::String_"):
    """A `dds.sample` sighting as the agent sends it."""
    attrs = [kv("dds.writer_guid", writer), kv("dds.sn", sn)]
    if topic is not None:
        attrs += [kv("dds.topic_raw", topic), kv("dds.type_raw", type_name)]
    attrs += [kv("ddscope.traffic_type", 1), kv("ddscope.first_ip_ts_ns", t_ns), kv("ddscope.complete", True),
              kv("dds.sample_size", 100), kv("ddscope.frags_expected", 0), kv("ddscope.frags_seen", 0),
              kv("ddscope.ip_frags", 1), kv("ddscope.retransmitted_frags", 0), kv("ddscope.retransmitted_bytes", 0),
              kv("dds.vendor_id", 0x0110)]
    body = ld(1, trace_id(writer, sn)) + ld(2, struct.pack(">Q", (sn << 1) | 1)) + ld(5, b"dds.sample") + vi(6, 1)
    body += fixed64(7, t_ns) + fixed64(8, t_ns)
    body += b"".join(ld(9, a) for a in attrs)
    return body


_FIXED = None


def fast_sample_span(i, t_ns):
    """`sample_span(writer_guid(i), 1, t_ns)` without a topic, built from a
    prepared tail: ~10× faster, for floods of a million distinct samples."""
    global _FIXED
    if _FIXED is None:
        _FIXED = b"".join(ld(9, a) for a in [kv("ddscope.traffic_type", 1), kv("ddscope.complete", True),
                                              kv("dds.sample_size", 100), kv("ddscope.frags_expected", 0),
                                              kv("ddscope.frags_seen", 0), kv("ddscope.ip_frags", 1),
                                              kv("ddscope.retransmitted_frags", 0), kv("ddscope.retransmitted_bytes", 0),
                                              kv("dds.vendor_id", 0x0110)])
    w = writer_guid(i).encode()
    tid = struct.pack(">QQ", i, 1)
    return (b"\x0a\x10" + tid + b"\x12\x08" + struct.pack(">Q", (i << 1) | 1) + b"\x2a\x0adds.sample\x30\x01"
            + fixed64(7, t_ns) + fixed64(8, t_ns)
            + ld(9, kv("dds.writer_guid", w)) + ld(9, kv("dds.sn", 1)) + ld(9, kv("ddscope.first_ip_ts_ns", t_ns)) + _FIXED)


def traces_request(agent, spans, seq=1):
    """ExportTraceServiceRequest: one resource (the agent) with one scope of `spans` (encoded Span messages)."""
    scope = ld(1, ld(1, b"ddscope.sightings")) + b"".join(ld(2, s) for s in spans)
    rs = ld(1, resource(agent, seq)) + ld(2, scope)
    return ld(1, rs)


def empty_spans_request(n):
    """The amplification case: n spans of zero bytes (two bytes each on the wire)."""
    scope = b"\x12\x00" * n
    return ld(1, ld(2, scope))


def writer_guid(i):
    return f"0110aaaa{i:016x}00001203"


def grpc_message(msg, compressed=False):
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(msg)) + msg


def gz(b):
    return gzip.compress(b, 6)


TRACES_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LOGS_METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


def _hpack_literal(name, value):
    # Literal header field without indexing, new name, no Huffman (RFC 7541 §6.2.2).
    def s(x):
        x = x.encode()
        assert len(x) < 127
        return bytes([len(x)]) + x
    return b"\x00" + s(name) + s(value)


class H2:
    """A cleartext HTTP/2 connection with prior knowledge that sends gRPC
    requests (honouring the server's flow-control windows) and reads frames
    without decoding their headers: what a test needs to hold streams open,
    push bodies and see which streams were answered."""

    def __init__(self, port, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + self._frame(4, 0, 0, b""))
        self.next_id = 1
        self.conn_window = 65535
        self.init_window = 65535
        self.windows = {}
        self.ended = set()   # streams the server answered to the end (or reset)
        self.data = {}       # stream -> response DATA bytes
        self.buf = b""
        self.closed = False

    @staticmethod
    def _frame(ftype, flags, stream, payload):
        return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload

    def start(self, path, token=None, gzip_encoding=False):
        sid = self.next_id
        self.next_id += 2
        h = b"".join(_hpack_literal(k, v) for k, v in [(":method", "POST"), (":scheme", "http"), (":path", path),
                                                        (":authority", "t"), ("content-type", "application/grpc"),
                                                        ("te", "trailers")])
        if gzip_encoding:
            h += _hpack_literal("grpc-encoding", "gzip")
        if token:
            h += _hpack_literal("authorization", f"Bearer {token}")
        self.s.sendall(self._frame(1, 0x4, sid, h))
        self.windows[sid] = self.init_window
        return sid

    def send(self, sid, data, end=False, deadline=None):
        """Sends DATA on `sid` as the windows allow (reading the server's
        updates meanwhile); returns the bytes sent (fewer when the stream was
        answered, the connection closed or `deadline` passed first)."""
        deadline = deadline or time.time() + 30
        if not data:
            if end:
                self.s.sendall(self._frame(0, 0x1, sid, b""))
            return 0
        off = 0
        while off < len(data):
            room = min(self.conn_window, self.windows.get(sid, 0), 16384, len(data) - off)
            if room <= 0:
                if sid in self.ended or self.closed or time.time() > deadline:
                    return off
                self.poll(0.2)
                continue
            last = end and off + room == len(data)
            try:
                self.s.sendall(self._frame(0, 0x1 if last else 0, sid, data[off:off + room]))
            except OSError:
                self.closed = True
                return off
            self.conn_window -= room
            self.windows[sid] -= room
            off += room
        return off

    def poll(self, timeout):
        """Reads what the server sent within `timeout` s."""
        self.s.settimeout(timeout)
        try:
            chunk = self.s.recv(65536)
        except (socket.timeout, BlockingIOError):
            return
        except OSError:
            self.closed = True
            return
        if not chunk:
            self.closed = True
            return
        self.buf += chunk
        while len(self.buf) >= 9:
            n = int.from_bytes(self.buf[:3], "big")
            if len(self.buf) < 9 + n:
                break
            ftype, flags = self.buf[3], self.buf[4]
            sid = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            payload = self.buf[9:9 + n]
            self.buf = self.buf[9 + n:]
            if ftype == 4 and not flags & 1:  # SETTINGS
                for i in range(0, len(payload), 6):
                    ident, val = struct.unpack(">HI", payload[i:i + 6])
                    if ident == 4:
                        for k in self.windows:
                            self.windows[k] += val - self.init_window
                        self.init_window = val
                self.s.sendall(self._frame(4, 1, 0, b""))
            elif ftype == 8:  # WINDOW_UPDATE
                inc = struct.unpack(">I", payload)[0] & 0x7FFFFFFF
                if sid == 0:
                    self.conn_window += inc
                else:
                    self.windows[sid] = self.windows.get(sid, 0) + inc
            elif ftype == 0:  # DATA
                self.data[sid] = self.data.get(sid, b"") + payload
                if n:
                    # Give the window back so the server can keep answering.
                    self.s.sendall(self._frame(8, 0, 0, struct.pack(">I", n)))
                if flags & 1:
                    self.ended.add(sid)
            elif ftype == 1 and flags & 1:  # HEADERS with END_STREAM (trailers)
                self.ended.add(sid)
            elif ftype == 3:  # RST_STREAM
                self.ended.add(sid)
            elif ftype == 7:  # GOAWAY
                self.closed = True
            elif ftype == 6 and not flags & 1:  # PING
                self.s.sendall(self._frame(6, 1, 0, payload))

    def wait(self, sids, timeout):
        deadline = time.time() + timeout
        while not set(sids) <= self.ended and not self.closed and time.time() < deadline:
            self.poll(0.2)
        return set(sids) <= self.ended

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass
