//! One-way delay, jitter, loss, duplicates and reordering of any UDP flow
//! between capture points — Bosk et al.'s two-PCAP method (Sec. VI-C, Eq. 9–10).
//!
//! Every UDP datagram (IP fragments put back together by the capture point's
//! decoder, [`crate::pipeline::Analysis::datagram`]) is identified by its content: the 5-tuple, the IP identification, the UDP
//! payload length and a CRC-32 of the UDP payload. The same datagram seen at
//! two capture points is the same packet X, and
//!
//! ```text
//! d_e2e(X) = t_R(X) − t_S(X) − t_o                 (Eq. 9)
//! j_e2e(X) = d_e2e(X) − d_e2e(X − 1)               (Eq. 10)
//! ```
//!
//! with t_S / t_R the capture times at the sending and receiving capture
//! points (the frame that completes the datagram, as tshark numbers it) and
//! t_o = offset(receiver) − offset(sender), the capture points' clock offsets.
//! X − 1 is the packet the sender sent just before X in the same flow; when it
//! did not arrive, j(X) is not defined (as for the first packet).
//!
//! Per capture point a [`FlowTap`] (a pipeline [`Analysis`]) turns datagrams into
//! sightings; [`run_files`] reads the captures on one thread each, merged by
//! watermark, into a [`FlowMatcher`], which judges each packet once every
//! capture has passed its first sighting by the window: delivered (per
//! receiving capture point), lost, or seen at receivers only. Flows and
//! packets in flight are bounded tables keyed by the wire; what they evict is
//! counted.

use crate::bounded::BoundedMap;
use crate::ipfrag::{ReassemblyLimits, ReassemblyStats};
use crate::latency::stats::{Dist, DistSummary};
use crate::pipeline::merge::BATCH;
use crate::pipeline::{Analysis, Batcher, CapturePoint, Datagram, Mark, Marked, Merge, Merger, WATERMARK_EVERY_NS};
use crate::record::{opt_i, Value};
use crate::sink::RowSink;
use crate::source::{open_file, CaptureError, CaptureSummary, Packet};
use ddscope_wire::ip::{self, PROTO_UDP};
use ddscope_wire::link::{self, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use ddscope_wire::{rtps, udp};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// At most this many capture points take part in one flow analysis.
pub const MAX_CAPTURES: usize = 64;

/// The caps and settings of a flow analysis.
#[derive(Debug, Clone, Copy)]
pub struct FlowConfig {
    /// A packet is judged this long (capture time) after its first sighting.
    pub window_ns: i64,
    /// Also measure RTPS datagrams (by default only non-RTPS UDP is).
    pub include_rtps: bool,
    /// Flows (5-tuples) remembered; the least recently active is evicted first.
    pub max_flows: usize,
    /// Packets waiting for their judgement; the oldest is evicted first.
    pub max_pending: usize,
    /// Receive positions remembered per flow and capture point for reordering.
    pub max_reorder_span: usize,
    /// IP reassembly of the capture points' decoders.
    pub reassembly: ReassemblyLimits,
}

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            window_ns: crate::window::Window::DEFAULT.ns(),
            include_rtps: false,
            max_flows: 4096,
            max_pending: 1 << 20,
            max_reorder_span: 65536,
            reassembly: ReassemblyLimits::default(),
        }
    }
}

/// A UDP flow: source and destination address and port (the protocol is UDP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FlowKey {
    pub src: SocketAddr,
    pub dst: SocketAddr,
}

/// What identifies one datagram at every capture point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketKey {
    pub flow: FlowKey,
    pub ip_id: u32,
    /// UDP payload length (per the headers).
    pub len: u32,
    /// CRC-32 (IEEE) of the captured UDP payload.
    pub crc: u32,
}

/// One datagram seen at one capture point.
#[derive(Debug, Clone, Copy)]
pub struct Sighting {
    pub key: PacketKey,
    /// Capture time of the frame that completed the datagram.
    pub ts_ns: i64,
    /// Capture time of its first IP fragment.
    pub first_ts_ns: i64,
    /// Frame that completed the datagram (tshark's numbering).
    pub frame: u64,
    pub ip_frags: u16,
}

/// What a tap saw and skipped.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TapStats {
    pub frames: u64,
    pub udp_datagrams: u64,
    /// Datagrams handed to the matcher.
    pub measured: u64,
    /// RTPS datagrams left out (measured with the include-RTPS setting).
    pub rtps_skipped: u64,
    pub non_ip_frames: u64,
    pub non_udp_packets: u64,
    pub unsupported_link_frames: u64,
    pub bad_headers: u64,
    /// Datagrams whose UDP payload the capture cut (snap length): not measured.
    pub snapped: u64,
    /// The capture point decoder's IP reassembly (set by the owner of the
    /// tap at the end: [`run_files`]).
    pub ip: ReassemblyStats,
    /// Capture time of the last frame.
    pub last_ts_ns: Option<i64>,
}

impl TapStats {
    /// Non-zero skip counters, as one phrase.
    pub fn skipped_line(&self) -> String {
        let mut p = vec![];
        for (n, what) in [
            (self.rtps_skipped, "RTPS datagrams"),
            (self.non_ip_frames, "non-IP frames"),
            (self.non_udp_packets, "non-UDP packets"),
            (self.unsupported_link_frames, "frames of an unsupported link type"),
            (self.bad_headers, "bad link/IP/UDP headers"),
            (self.snapped, "datagrams cut by the snap length"),
            (self.ip.datagrams_timed_out, "IP datagrams timed out in reassembly"),
            (self.ip.datagrams_evicted, "IP datagrams evicted from reassembly"),
            (self.ip.datagrams_incomplete_at_end, "IP datagrams incomplete at end of capture"),
            (self.ip.oversized_fragments, "oversized IP fragments"),
            (self.ip.datagrams_too_fragmented, "IP datagrams with too many holes"),
        ] {
            if n > 0 {
                p.push(format!("{n} {what}"));
            }
        }
        if p.is_empty() {
            "nothing skipped".into()
        } else {
            format!("not measured: {}", p.join(", "))
        }
    }
}

/// The pipeline stage of one capture point: the decoder's UDP datagrams
/// (whole or reassembled) → sightings; frames are only counted and
/// classified by what is not measured. The owner drains [`FlowTap::take`],
/// reads [`FlowTap::watermark`] (the capture time of the last frame) and
/// copies the decoder's reassembly counters into `stats.ip`.
pub struct FlowTap {
    include_rtps: bool,
    pub stats: TapStats,
    sightings: Vec<Sighting>,
    first_ts: i64,
    last_ts: i64,
}

impl FlowTap {
    pub fn new(cfg: &FlowConfig) -> Self {
        FlowTap {
            include_rtps: cfg.include_rtps,
            stats: TapStats::default(),
            sightings: Vec::new(),
            first_ts: i64::MIN,
            last_ts: i64::MIN,
        }
    }

    /// Sightings collected since the last call.
    pub fn take(&mut self) -> Vec<Sighting> {
        std::mem::take(&mut self.sightings)
    }

    /// Sightings waiting to be taken.
    pub fn pending(&self) -> usize {
        self.sightings.len()
    }

    /// Capture time of the first frame read (`i64::MIN` before any).
    pub fn first_ts(&self) -> i64 {
        self.first_ts
    }

    /// Capture time of the last frame read.
    pub fn watermark(&self) -> i64 {
        self.last_ts
    }

    fn sight(&mut self, d: &Datagram<'_>) {
        self.stats.udp_datagrams += 1;
        if d.missing > 0 {
            self.stats.snapped += 1;
            return;
        }
        let u = match udp::parse(d.udp) {
            Ok(u) => u,
            Err(_) => {
                self.stats.bad_headers += 1;
                return;
            }
        };
        if !self.include_rtps && rtps::is_rtps(u.payload) {
            self.stats.rtps_skipped += 1;
            return;
        }
        self.stats.measured += 1;
        let key = PacketKey {
            flow: FlowKey { src: SocketAddr::new(d.src, u.src_port), dst: SocketAddr::new(d.dst, u.dst_port) },
            ip_id: d.ip_id,
            len: u.payload.len() as u32,
            crc: crc32fast::hash(u.payload),
        };
        self.sightings.push(Sighting { key, ts_ns: d.ts_ns, first_ts_ns: d.first_ts_ns, frame: d.frame, ip_frags: d.fragments });
    }
}

impl Analysis for FlowTap {
    fn frame(&mut self, p: &Packet<'_>) {
        self.stats.frames += 1;
        if self.first_ts == i64::MIN {
            self.first_ts = p.ts_ns;
        }
        self.last_ts = self.last_ts.max(p.ts_ns);
        if let link::LinkType::Other(_) = p.link {
            self.stats.unsupported_link_frames += 1;
            return;
        }
        let Ok(net) = link::parse(p.link, p.data) else {
            self.stats.bad_headers += 1;
            return;
        };
        let parsed = match net.ethertype {
            ETHERTYPE_IPV4 => ip::parse_ipv4(net.payload),
            ETHERTYPE_IPV6 => ip::parse_ipv6(net.payload),
            _ => {
                self.stats.non_ip_frames += 1;
                return;
            }
        };
        let Ok(ipp) = parsed else {
            self.stats.bad_headers += 1;
            return;
        };
        if ipp.protocol != PROTO_UDP {
            self.stats.non_udp_packets += 1;
        }
        // UDP: the decoder hands the datagram over (whole or reassembled).
    }

    fn datagram(&mut self, d: &Datagram<'_>) {
        self.sight(d);
    }

    fn wants_datagrams(&self) -> bool {
        true
    }

    fn end(&mut self) {
        self.stats.last_ts_ns = (self.last_ts != i64::MIN).then_some(self.last_ts);
    }
}

/// How one packet ended at one receiving capture point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PacketStatus {
    /// Seen at the sender and at this receiver.
    Delivered,
    /// Seen at the sender, not at this receiver within the window.
    Lost,
    /// Seen at this receiver, not at the sender (e.g. before the sender's capture started).
    Unsent,
}

impl PacketStatus {
    pub fn name(self) -> &'static str {
        match self {
            PacketStatus::Delivered => "delivered",
            PacketStatus::Lost => "lost",
            PacketStatus::Unsent => "unsent",
        }
    }
}

/// One packet at one receiving capture point.
#[derive(Debug, Clone)]
pub struct FlowPacketRow {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub sender: Arc<str>,
    pub receiver: Arc<str>,
    pub status: PacketStatus,
    /// Position of the packet in its flow, in sending order at the sender (from 0).
    pub send_index: Option<u64>,
    pub ip_id: u32,
    pub len: u32,
    pub crc32: u32,
    pub ip_frags: u16,
    pub send_frame: Option<u64>,
    pub recv_frame: Option<u64>,
    /// Capture timestamps as recorded (no offset applied).
    pub send_ts_ns: Option<i64>,
    pub recv_ts_ns: Option<i64>,
    /// Eq. 9: t_R − t_S − t_o.
    pub delay_ns: Option<i64>,
    /// Eq. 10: d(X) − d(X−1), when X−1 was delivered too.
    pub jitter_ns: Option<i64>,
    /// Extra copies of the packet at the receiver.
    pub duplicates: u32,
    /// Reached the receiver after a packet sent after it (RFC 4737 sense).
    pub reordered: bool,
}

crate::record!(FlowPacketRow, r, {
    src: Str => Value::Addr(r.src),
    dst: Str => Value::Addr(r.dst),
    sender: Str => Value::S(&r.sender),
    receiver: Str => Value::S(&r.receiver),
    status: Str => Value::S(r.status.name()),
    send_index: U64 => r.send_index.map_or(Value::Null, Value::U),
    ip_id: U64 => Value::U(r.ip_id as u64),
    udp_payload_len: U64 => Value::U(r.len as u64),
    payload_crc32: U64 => Value::U(r.crc32 as u64),
    ip_frags: U64 => Value::U(r.ip_frags as u64),
    send_frame: U64 => r.send_frame.map_or(Value::Null, Value::U),
    recv_frame: U64 => r.recv_frame.map_or(Value::Null, Value::U),
    send_ts_ns: I64 => opt_i(r.send_ts_ns),
    recv_ts_ns: I64 => opt_i(r.recv_ts_ns),
    delay_ns: I64 => opt_i(r.delay_ns),
    jitter_ns: I64 => opt_i(r.jitter_ns),
    duplicates: U64 => Value::U(r.duplicates as u64),
    reordered: Bool => Value::B(r.reordered),
});

/// One flow from its sender to one receiving capture point.
#[derive(Debug, Clone, Serialize)]
pub struct FlowStats {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub sender: String,
    pub receiver: String,
    /// Packets seen at the sender (after the receiver was known).
    pub sent: u64,
    pub delivered: u64,
    pub lost: u64,
    /// Seen at the receiver only.
    pub unsent: u64,
    /// Extra copies at the receiver.
    pub duplicates: u64,
    pub reordered: u64,
    /// Eq. 9, per delivered packet.
    pub delay: DistSummary,
    /// Eq. 10, measured (signed) jitter.
    pub jitter: DistSummary,
    /// |Eq. 10|, absolute jitter.
    pub jitter_abs: DistSummary,
    /// Mean payload bytes per packet sent.
    pub mean_payload_bytes: f64,
    /// First to last sending time, seconds.
    pub span_s: f64,
}

impl FlowStats {
    pub fn loss_pct(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost as f64 * 100.0 / self.sent as f64
        }
    }
    /// Offered rate at the sender, bits per second of UDP payload.
    pub fn payload_bps(&self) -> f64 {
        if self.span_s > 0.0 {
            self.sent as f64 * self.mean_payload_bytes * 8.0 / self.span_s
        } else {
            0.0
        }
    }
}

// Summaries are in ms; the table shows µs (Bosk et al. gives jitter in µs).
crate::record!(FlowStats, r, let {
    let f = |has: bool, v: f64| if has { Value::F(v * 1e3) } else { Value::Null };
    let d = r.delay.count > 0;
    let j = r.jitter.count > 0;
}, {
    src: Str => Value::Addr(r.src),
    dst: Str => Value::Addr(r.dst),
    sender: Str => Value::S(&r.sender),
    receiver: Str => Value::S(&r.receiver),
    sent: U64 => Value::U(r.sent),
    delivered: U64 => Value::U(r.delivered),
    lost: U64 => Value::U(r.lost),
    loss_pct: F64 => Value::F(r.loss_pct()),
    dups: U64 => Value::U(r.duplicates),
    reordered: U64 => Value::U(r.reordered),
    unsent: U64 => Value::U(r.unsent),
    delay_mean_us: F64 => f(d, r.delay.mean_ms),
    delay_p50_us: F64 => f(d, r.delay.p50_ms),
    delay_p99_us: F64 => f(d, r.delay.p99_ms),
    delay_max_us: F64 => f(d, r.delay.max_ms),
    jitter_mean_us: F64 => f(j, r.jitter.mean_ms),
    abs_jitter_mean_us: F64 => f(j, r.jitter_abs.mean_ms),
    abs_jitter_p50_us: F64 => f(j, r.jitter_abs.p50_ms),
    abs_jitter_p99_us: F64 => f(j, r.jitter_abs.p99_ms),
    abs_jitter_max_us: F64 => f(j, r.jitter_abs.max_ms),
    payload_mbps: F64 => Value::F(r.payload_bps() / 1e6),
});

/// What the matcher counted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MatchStats {
    pub sightings: u64,
    pub packets_judged: u64,
    /// Packets of flows that no second capture point saw (nothing to measure).
    pub one_point_packets: u64,
    /// Packets sent before the receiving capture point started capturing, or
    /// after it stopped (not counted as sent or lost there).
    pub outside_receiver_capture: u64,
    /// Extra copies at the sending capture point.
    pub sender_duplicates: u64,
    /// Packets dropped unjudged to stay within the in-flight cap (oldest first).
    pub pending_evicted: u64,
    /// Flows dropped with their statistics to stay within the flow cap (least recently active first).
    pub flows_evicted: u64,
    /// Packets those flows had judged.
    pub flows_evicted_packets: u64,
    /// Times the reordering bookkeeping of a flow skipped ahead (more receive positions open than the cap).
    pub reorder_span_skips: u64,
    pub peak_pending: u64,
}

impl MatchStats {
    /// Evictions and skips, or `None` when there were none.
    pub fn problem_line(&self) -> Option<String> {
        let mut p = vec![];
        if self.pending_evicted > 0 {
            p.push(format!("{} packets evicted unjudged (in-flight cap)", self.pending_evicted));
        }
        if self.flows_evicted > 0 {
            p.push(format!("{} flows evicted with {} judged packets (flow cap)", self.flows_evicted, self.flows_evicted_packets));
        }
        if self.reorder_span_skips > 0 {
            p.push(format!("{} reordering bookkeeping skips", self.reorder_span_skips));
        }
        (!p.is_empty()).then(|| p.join(", "))
    }
}

#[derive(Clone, Copy)]
struct Seen {
    cap: u8,
    /// Offset-corrected time.
    t: i64,
    raw_ts: i64,
    frame: u64,
    frags: u16,
    copies: u32,
    /// Position among the flow's first sightings at this capture point.
    rx_index: u64,
}

struct Pending {
    order: (i64, u64),
    seen: smallvec::SmallVec<[Seen; 2]>,
}

/// Receive positions of one flow at one capture point already judged.
#[derive(Default)]
struct RxOrder {
    next: u64,
    /// Every position <= this is judged.
    contiguous: u64,
    above: BTreeSet<u64>,
}

impl RxOrder {
    fn done(&mut self, i: u64, cap: usize, skips: &mut u64) {
        if i <= self.contiguous {
            return;
        }
        self.above.insert(i);
        while self.above.first() == Some(&(self.contiguous + 1)) {
            self.above.pop_first();
            self.contiguous += 1;
        }
        if self.above.len() > cap {
            if let Some(f) = self.above.pop_first() {
                self.contiguous = f;
                *skips += 1;
                while self.above.first() == Some(&(self.contiguous + 1)) {
                    self.above.pop_first();
                    self.contiguous += 1;
                }
            }
        }
    }
}

#[derive(Default)]
struct RecvState {
    sent: u64,
    delivered: u64,
    lost: u64,
    unsent: u64,
    duplicates: u64,
    reordered: u64,
    delay: Dist,
    jitter: Dist,
    jitter_abs: Dist,
    /// (send index, delay) of the last packet judged at this receiver.
    last: Option<(u64, Option<i64>)>,
}

struct FlowState {
    sender: Option<u8>,
    /// Capture points that have seen the flow (bit per capture).
    seen: u64,
    rx: Vec<RxOrder>,
    recv: BTreeMap<u8, RecvState>,
    sent: u64,
    bytes: u64,
    first_send: i64,
    last_send: i64,
    judged: u64,
}

/// The cross-capture judge: sightings in, per-packet rows and per-flow statistics out.
pub struct FlowMatcher {
    cfg: FlowConfig,
    names: Vec<Arc<str>>,
    offsets: Vec<i64>,
    pending: BoundedMap<PacketKey, Pending>,
    /// Judgement order: (time of the first sighting, arrival number) → packet.
    order: BTreeMap<(i64, u64), PacketKey>,
    arrivals: u64,
    flows: BoundedMap<FlowKey, FlowState>,
    watermarks: Vec<i64>,
    ended: Vec<bool>,
    /// Time of each capture point's first frame (offset-corrected).
    starts: Vec<i64>,
    /// Time of each capture point's last frame, once it has ended (offset-corrected).
    stops: Vec<i64>,
    pub stats: MatchStats,
}

impl FlowMatcher {
    /// `names` and `offsets_ns` (t_o per capture point, subtracted from its
    /// times) in capture order; at most [`MAX_CAPTURES`].
    pub fn new(cfg: FlowConfig, names: Vec<Arc<str>>, offsets_ns: Vec<i64>) -> FlowMatcher {
        let n = names.len().min(MAX_CAPTURES);
        FlowMatcher {
            cfg,
            offsets: (0..n).map(|i| offsets_ns.get(i).copied().unwrap_or(0)).collect(),
            names: names.into_iter().take(n).collect(),
            pending: BoundedMap::new(cfg.max_pending.max(1)),
            order: BTreeMap::new(),
            arrivals: 0,
            flows: BoundedMap::new(cfg.max_flows.max(1)),
            watermarks: vec![i64::MIN; n],
            ended: vec![false; n],
            starts: vec![i64::MIN; n],
            stops: vec![i64::MAX; n],
            stats: MatchStats::default(),
        }
    }

    fn flow_mut(&mut self, k: FlowKey) -> &mut FlowState {
        let n = self.names.len();
        let stats = &mut self.stats;
        self.flows.get_or_insert_with(
            k,
            || FlowState {
                sender: None,
                seen: 0,
                rx: (0..n).map(|_| RxOrder::default()).collect(),
                recv: BTreeMap::new(),
                sent: 0,
                bytes: 0,
                first_send: i64::MAX,
                last_send: i64::MIN,
                judged: 0,
            },
            &mut |_, f: FlowState| {
                stats.flows_evicted += 1;
                stats.flows_evicted_packets += f.judged;
            },
        )
    }

    /// A datagram seen at capture point `cap`.
    pub fn sighting(&mut self, cap: usize, s: &Sighting) {
        if cap >= self.names.len() {
            return;
        }
        self.stats.sightings += 1;
        let t = s.ts_ns.saturating_sub(self.offsets[cap]);
        if let Some(p) = self.pending.get_mut(&s.key) {
            if let Some(e) = p.seen.iter_mut().find(|e| e.cap as usize == cap) {
                e.copies += 1;
                return;
            }
        }
        let flow = self.flow_mut(s.key.flow);
        flow.seen |= 1u64 << cap;
        flow.rx[cap].next += 1;
        let seen = Seen { cap: cap as u8, t, raw_ts: s.ts_ns, frame: s.frame, frags: s.ip_frags, copies: 1, rx_index: flow.rx[cap].next };
        if let Some(p) = self.pending.get_mut(&s.key) {
            p.seen.push(seen);
            return;
        }
        self.arrivals += 1;
        let order = (t, self.arrivals);
        let mut evicted = vec![];
        self.pending.insert(s.key, Pending { order, seen: smallvec::smallvec![seen] }, &mut |k, p| evicted.push((k, p)));
        self.order.insert(order, s.key);
        self.stats.peak_pending = self.stats.peak_pending.max(self.pending.len() as u64);
        for (k, p) in evicted {
            self.stats.pending_evicted += 1;
            self.order.remove(&p.order);
            self.release(&k, &p);
        }
    }

    /// Marks the receive positions of a packet as judged.
    fn release(&mut self, k: &PacketKey, p: &Pending) {
        let span = self.cfg.max_reorder_span.max(1);
        let mut skips = 0;
        if let Some(f) = self.flows.get_mut(&k.flow) {
            for s in &p.seen {
                f.rx[s.cap as usize].done(s.rx_index, span, &mut skips);
            }
        }
        self.stats.reorder_span_skips += skips;
    }

    /// Capture point `cap` started capturing at `t_ns` (its own clock): a
    /// packet sent before that is not expected there (not lost).
    pub fn start(&mut self, cap: usize, t_ns: i64) {
        if cap < self.starts.len() && self.starts[cap] == i64::MIN {
            self.starts[cap] = t_ns.saturating_sub(self.offsets[cap]);
        }
    }

    /// Capture point `cap` stopped capturing at `t_ns` (its own clock, the
    /// last frame): a packet sent after that is not expected there.
    pub fn stop(&mut self, cap: usize, t_ns: i64) {
        if cap < self.stops.len() {
            self.stops[cap] = t_ns.saturating_sub(self.offsets[cap]);
        }
    }

    /// Capture point `cap` has read everything up to `t_ns` (its own clock).
    pub fn watermark(&mut self, cap: usize, t_ns: i64, out: &mut dyn RowSink<FlowPacketRow>) {
        if cap < self.watermarks.len() {
            self.watermarks[cap] = self.watermarks[cap].max(t_ns.saturating_sub(self.offsets[cap]));
            self.judge_ready(out);
        }
    }

    /// Capture point `cap` has ended.
    pub fn end(&mut self, cap: usize, out: &mut dyn RowSink<FlowPacketRow>) {
        if cap < self.ended.len() {
            self.ended[cap] = true;
            self.judge_ready(out);
        }
    }

    /// Judges everything left (all captures ended).
    pub fn finish(&mut self, out: &mut dyn RowSink<FlowPacketRow>) {
        self.ended.iter_mut().for_each(|e| *e = true);
        self.judge_ready(out);
    }

    fn judge_ready(&mut self, out: &mut dyn RowSink<FlowPacketRow>) {
        let horizon = self
            .watermarks
            .iter()
            .zip(&self.ended)
            .filter(|(_, e)| !**e)
            .map(|(w, _)| *w)
            .min()
            .map_or(i64::MAX, |w| w.saturating_sub(self.cfg.window_ns));
        let mut ready = vec![];
        while let Some(e) = self.order.first_entry() {
            if e.key().0 > horizon {
                break;
            }
            let k = e.remove();
            if let Some(p) = self.pending.remove(&k) {
                ready.push((k, p));
            }
        }
        // In sending order: the earliest sighting of each packet.
        ready.sort_by_key(|(_, p)| (p.seen.iter().map(|s| s.t).min().unwrap_or(i64::MAX), p.order.1));
        for (k, p) in ready {
            self.judge(&k, &p, out);
            self.release(&k, &p);
        }
    }

    fn judge(&mut self, k: &PacketKey, p: &Pending, out: &mut dyn RowSink<FlowPacketRow>) {
        self.stats.packets_judged += 1;
        let names = self.names.clone();
        let starts = self.starts.clone();
        let stops = self.stops.clone();
        let earliest = p.seen.iter().min_by_key(|s| s.t).map(|s| s.cap).unwrap_or(0);
        let flow = self.flow_mut(k.flow);
        flow.judged += 1;
        let sender = *flow.sender.get_or_insert(earliest);
        let at_sender = p.seen.iter().find(|s| s.cap == sender).copied();
        let seen_by: Vec<u8> = (0..names.len() as u8).filter(|&c| c != sender && flow.seen & (1u64 << c) != 0).collect();
        if seen_by.is_empty() {
            self.stats.one_point_packets += 1;
            return;
        }
        // A receiving capture point that had not started yet, or had stopped, does not count the packet.
        let receivers: Vec<u8> =
            seen_by.iter().copied().filter(|&c| at_sender.is_none_or(|s| starts[c as usize] <= s.t && s.t <= stops[c as usize])).collect();
        if receivers.is_empty() {
            self.stats.outside_receiver_capture += 1;
            return;
        }
        let send_index = at_sender.map(|s| {
            let i = flow.sent;
            flow.sent += 1;
            flow.bytes += k.len as u64;
            flow.first_send = flow.first_send.min(s.t);
            flow.last_send = flow.last_send.max(s.t);
            i
        });
        let mut sender_dups = 0;
        if let Some(s) = at_sender {
            sender_dups = (s.copies - 1) as u64;
        }
        let mut rows = vec![];
        for r in receivers {
            let at_r = p.seen.iter().find(|s| s.cap == r).copied();
            let late = at_r.map(|s| flow.rx[r as usize].contiguous + 1 < s.rx_index).unwrap_or(false);
            let st = flow.recv.entry(r).or_default();
            let mut delay = None;
            let mut jitter = None;
            let mut dups = 0;
            let status = match (at_sender, at_r) {
                (Some(s), Some(rr)) => {
                    st.sent += 1;
                    st.delivered += 1;
                    let d = rr.t.saturating_sub(s.t);
                    delay = Some(d);
                    st.delay.record(d);
                    let i = send_index.unwrap_or(0);
                    if let Some((pi, Some(pd))) = st.last {
                        if pi + 1 == i {
                            let j = d.saturating_sub(pd);
                            jitter = Some(j);
                            st.jitter.record(j);
                            st.jitter_abs.record(j.saturating_abs());
                        }
                    }
                    st.last = Some((i, Some(d)));
                    dups = rr.copies - 1;
                    st.duplicates += dups as u64;
                    if late {
                        st.reordered += 1;
                    }
                    PacketStatus::Delivered
                }
                (Some(_), None) => {
                    st.sent += 1;
                    st.lost += 1;
                    st.last = Some((send_index.unwrap_or(0), None));
                    PacketStatus::Lost
                }
                (None, Some(rr)) => {
                    st.unsent += 1;
                    dups = rr.copies - 1;
                    st.duplicates += dups as u64;
                    PacketStatus::Unsent
                }
                (None, None) => continue,
            };
            let frags = at_r.or(at_sender).map_or(1, |s| s.frags);
            rows.push(FlowPacketRow {
                src: k.flow.src,
                dst: k.flow.dst,
                sender: names[sender as usize].clone(),
                receiver: names[r as usize].clone(),
                status,
                send_index,
                ip_id: k.ip_id,
                len: k.len,
                crc32: k.crc,
                ip_frags: frags,
                send_frame: at_sender.map(|s| s.frame),
                recv_frame: at_r.map(|s| s.frame),
                send_ts_ns: at_sender.map(|s| s.raw_ts),
                recv_ts_ns: at_r.map(|s| s.raw_ts),
                delay_ns: delay,
                jitter_ns: jitter,
                duplicates: dups,
                reordered: status == PacketStatus::Delivered && late,
            });
        }
        self.stats.sender_duplicates += sender_dups;
        for r in rows {
            out.take(r);
        }
    }

    /// Per flow and receiving capture point, ordered by flow.
    pub fn summaries(&self) -> Vec<FlowStats> {
        let mut v = vec![];
        for (k, f) in self.flows.iter() {
            let Some(sender) = f.sender else { continue };
            for (r, st) in &f.recv {
                v.push(FlowStats {
                    src: k.src,
                    dst: k.dst,
                    sender: self.names[sender as usize].to_string(),
                    receiver: self.names[*r as usize].to_string(),
                    sent: st.sent,
                    delivered: st.delivered,
                    lost: st.lost,
                    unsent: st.unsent,
                    duplicates: st.duplicates,
                    reordered: st.reordered,
                    delay: st.delay.summary(),
                    jitter: st.jitter.summary(),
                    jitter_abs: st.jitter_abs.summary(),
                    mean_payload_bytes: if f.sent > 0 { f.bytes as f64 / f.sent as f64 } else { 0.0 },
                    span_s: if f.last_send > f.first_send { (f.last_send - f.first_send) as f64 / 1e9 } else { 0.0 },
                });
            }
        }
        v.sort_by(|a, b| (a.src, a.dst, &a.receiver).cmp(&(b.src, b.dst, &b.receiver)));
        v
    }

    /// Flows (5-tuples) seen at one capture point only.
    pub fn one_point_flows(&self) -> usize {
        self.flows.values().filter(|f| f.seen.count_ones() < 2).count()
    }

    /// Per-packet delays are also kept per flow for plots: the delay
    /// distribution of one flow and receiver.
    pub fn delay_dist(&self, src: SocketAddr, dst: SocketAddr, receiver: &str) -> Option<&Dist> {
        let f = self.flows.get(&FlowKey { src, dst })?;
        let r = self.names.iter().position(|n| &**n == receiver)? as u8;
        f.recv.get(&r).map(|s| &s.delay)
    }
}

/// A capture file taking part in a flow analysis.
#[derive(Debug, Clone)]
pub struct FlowInput {
    pub name: String,
    pub path: PathBuf,
    /// t_o of this capture point, subtracted from its timestamps.
    pub offset_ns: i64,
}

/// What one capture held.
#[derive(Debug, Clone, Serialize)]
pub struct FlowCaptureOutcome {
    pub name: String,
    pub path: String,
    pub offset_ns: i64,
    pub capture: CaptureSummary,
    pub tap: TapStats,
}

/// Why a flow analysis could not run.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error("flow delay needs two or more capture points (a sender and a receiver); got {0}")]
    TooFewCaptures(usize),
    #[error("at most {MAX_CAPTURES} capture points; got {0}")]
    TooManyCaptures(usize),
    #[error("two capture points are both named {0:?} ({1} and {2}): rename one (names come from file names)")]
    SameName(String, PathBuf, PathBuf),
    #[error("{0} and {1} are the same file: give each capture point once")]
    SameFile(PathBuf, PathBuf),
    #[error("capture reader of {0} stopped")]
    Stopped(PathBuf),
}

/// What a capture's thread hands the merge.
enum FlowItem {
    /// The capture's first frame time (once, before its first sighting).
    Start(i64),
    Seen(Sighting),
    /// The capture has been read up to this time (its own clock).
    Watermark(i64),
    End,
}

impl Marked for FlowItem {
    fn mark(&self) -> Mark {
        match self {
            FlowItem::Watermark(t) => Mark::Watermark(*t),
            FlowItem::End => Mark::End,
            _ => Mark::None,
        }
    }
}

type FlowOutcome = Box<(CaptureSummary, TapStats)>;

/// The flow matcher fed by the merge.
struct MatchFlows<'a> {
    m: FlowMatcher,
    out: &'a mut dyn RowSink<FlowPacketRow>,
    outcomes: Vec<Option<(CaptureSummary, TapStats)>>,
}

impl Merger<Vec<FlowItem>, FlowOutcome> for MatchFlows<'_> {
    fn batch(&mut self, c: usize, b: Vec<FlowItem>) {
        for it in b {
            match it {
                FlowItem::Start(t) => self.m.start(c, t),
                FlowItem::Seen(s) => self.m.sighting(c, &s),
                FlowItem::Watermark(t) => self.m.watermark(c, t, self.out),
                FlowItem::End => {}
            }
        }
    }

    fn done(&mut self, c: usize, o: Option<FlowOutcome>) {
        if let Some(o) = o {
            if let Some(t) = o.1.last_ts_ns {
                self.m.stop(c, t);
            }
            self.outcomes[c] = Some(*o);
        }
        self.m.end(c, self.out);
    }
}

/// Reads `inputs` (one thread each, merged by watermark: the capture furthest
/// behind goes next), matching their UDP datagrams; rows go to `out` as
/// packets are judged.
pub fn run_files(
    inputs: &[FlowInput],
    cfg: FlowConfig,
    progress: &[Arc<AtomicU64>],
    out: &mut dyn RowSink<FlowPacketRow>,
) -> Result<(FlowMatcher, Vec<FlowCaptureOutcome>), FlowError> {
    if inputs.len() < 2 {
        return Err(FlowError::TooFewCaptures(inputs.len()));
    }
    if inputs.len() > MAX_CAPTURES {
        return Err(FlowError::TooManyCaptures(inputs.len()));
    }
    for i in 0..inputs.len() {
        for j in i + 1..inputs.len() {
            if crate::session::same_file(&inputs[i].path, &inputs[j].path) {
                return Err(FlowError::SameFile(inputs[i].path.clone(), inputs[j].path.clone()));
            }
            if inputs[i].name == inputs[j].name {
                return Err(FlowError::SameName(inputs[i].name.clone(), inputs[i].path.clone(), inputs[j].path.clone()));
            }
        }
    }
    let mut sources = vec![];
    for (i, input) in inputs.iter().enumerate() {
        sources.push(open_file(&input.path, progress.get(i).cloned())?);
    }
    let mut merge: Merge<Vec<FlowItem>, FlowOutcome> = Merge::new();
    for (input, mut src) in inputs.iter().cloned().zip(sources) {
        merge.spawn(input.offset_ns, move |send| {
            let mut tap = FlowTap::new(&cfg);
            // The decoder reassembles IP datagrams for the tap (its other
            // counters are not used here).
            let dcfg = crate::decode::DecoderConfig { reassembly: cfg.reassembly, ..Default::default() };
            let mut point = CapturePoint::new(&input.name, dcfg, None);
            // The one batcher (as the correlation feed's): a batch goes when full and at the end, a
            // watermark goes in once the capture has moved on by a watermark interval.
            let stopped = std::cell::Cell::new(false);
            let mut started = false;
            let mut batch = Batcher::new(BATCH, |items: Vec<FlowItem>| {
                if !stopped.get() && !send(items) {
                    stopped.set(true);
                }
            });
            loop {
                let ended = !matches!(point.step(&mut src, &mut tap), Ok(p) if p != crate::source::Poll::Ended);
                if ended {
                    point.finish(&mut tap);
                    tap.stats.ip = point.decoder.stats.ip;
                }
                if !started && tap.first_ts() != i64::MIN {
                    started = true;
                    batch.push(FlowItem::Start(tap.first_ts()));
                }
                for s in tap.take() {
                    batch.push(FlowItem::Seen(s));
                }
                if ended {
                    batch.push(FlowItem::End);
                    batch.flush();
                    break;
                }
                if batch.watermark_due(tap.watermark(), WATERMARK_EVERY_NS) {
                    batch.push(FlowItem::Watermark(tap.watermark()));
                }
                if stopped.get() {
                    break;
                }
            }
            drop(batch);
            Box::new((src.into_summary(), tap.stats.clone()))
        });
    }
    let names: Vec<Arc<str>> = inputs.iter().map(|i| Arc::from(i.name.as_str())).collect();
    let m = FlowMatcher::new(cfg, names, inputs.iter().map(|i| i.offset_ns).collect());
    let mut into = MatchFlows { m, out, outcomes: (0..inputs.len()).map(|_| None).collect() };
    merge.run(&mut into);
    let MatchFlows { mut m, out, outcomes } = into;
    m.finish(out);
    let mut result = vec![];
    for (i, o) in outcomes.into_iter().enumerate() {
        let (capture, tap) = o.ok_or_else(|| FlowError::Stopped(inputs[i].path.clone()))?;
        result.push(FlowCaptureOutcome {
            name: inputs[i].name.clone(),
            path: inputs[i].path.display().to_string(),
            offset_ns: inputs[i].offset_ns,
            capture,
            tap,
        });
    }
    Ok((m, result))
}

#[cfg(test)]
mod tests {
    //! Constructed captures with known loss, duplicates, reordering, IP
    //! fragments and a clock offset. Oracle: the packets the test wrote.
    use super::*;
    use ddscope_pcapfile::{InterfaceOptions, PcapngWriter};
    use ddscope_testkit::{udp_frames, FrameOptions};

    const T0: i64 = 1_700_000_000_000_000_000;
    const TAI: i64 = 37_000_000_000;

    fn write(path: &std::path::Path, mut frames: Vec<(i64, Vec<u8>)>) {
        frames.sort_by_key(|f| f.0);
        let f = std::fs::File::create(path).expect("create capture");
        let mut w = PcapngWriter::new(f, &InterfaceOptions { linktype: 1, ..Default::default() }).expect("pcapng");
        for (ts, d) in frames {
            w.packet(ts, &d, d.len() as u32).expect("write");
        }
        w.flush().expect("flush");
    }

    fn payload(i: usize) -> Vec<u8> {
        let n = if i == 5 { 3000 } else { 100 };
        (0..n).map(|b| (b as u8) ^ (i as u8)).collect()
    }

    struct Case {
        dir: PathBuf,
        /// Per packet: send time (last fragment) and receive time (last fragment) on A's clock.
        times: Vec<(i64, Option<i64>)>,
    }

    fn build(name: &str) -> Case {
        let dir = std::env::temp_dir().join(format!("ddscope-flows-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let src: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let dst: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        let (mut a, mut b) = (vec![], vec![]);
        let mut times = vec![];
        for i in 0..20usize {
            let frames = udp_frames(src, dst, 100 + i as u32, &payload(i), &FrameOptions::default());
            let ts = T0 + i as i64 * 1_000_000;
            let nf = frames.len() as i64;
            for (k, f) in frames.iter().enumerate() {
                a.push((ts + k as i64 * 1000, f.clone()));
            }
            let sent = ts + (nf - 1) * 1000;
            if i == 3 || i == 11 {
                times.push((sent, None));
                continue;
            }
            let mut r = ts + 100_000 + i as i64 * 10;
            if i == 14 {
                r = T0 + 15 * 1_000_000 + 100_000 + 150 + 5000; // after packet 15
            }
            // B's fragments arrive in reverse order, 2 µs apart; B's clock is 37 s ahead
            for (k, f) in frames.iter().rev().enumerate() {
                b.push((r + TAI + k as i64 * 2000, f.clone()));
            }
            let recv = r + (nf - 1) * 2000;
            if i == 7 {
                b.push((recv + TAI + 50_000, frames[0].clone())); // a duplicate copy
            }
            times.push((sent, Some(recv)));
        }
        // a flow only A sees, and an RTPS datagram both see
        let other: SocketAddr = "10.0.0.1:53".parse().unwrap();
        let dns: SocketAddr = "10.0.0.9:53".parse().unwrap();
        for f in udp_frames(other, dns, 7, b"query", &FrameOptions::default()) {
            a.push((T0 + 500, f));
        }
        // B starts capturing before A sends: a frame only B sees
        for f in udp_frames("10.0.0.2:9999".parse().unwrap(), "10.0.0.8:9999".parse().unwrap(), 8, b"hello", &FrameOptions::default()) {
            b.push((T0 + TAI - 10_000, f));
        }
        let mut rtps_msg = b"RTPS\x02\x03\x01\x10".to_vec();
        rtps_msg.extend_from_slice(&[1; 12]);
        for f in udp_frames(src, "10.0.0.2:7400".parse().unwrap(), 9, &rtps_msg, &FrameOptions::default()) {
            a.push((T0 + 700, f.clone()));
            b.push((T0 + TAI + 900, f));
        }
        write(&dir.join("a.pcapng"), a);
        write(&dir.join("b.pcapng"), b);
        Case { dir, times }
    }

    fn inputs(c: &Case) -> Vec<FlowInput> {
        vec![
            FlowInput { name: "a".into(), path: c.dir.join("a.pcapng"), offset_ns: 0 },
            FlowInput { name: "b".into(), path: c.dir.join("b.pcapng"), offset_ns: TAI },
        ]
    }

    #[test]
    fn known_loss_duplicates_reordering_fragments_and_offset() {
        let c = build("known");
        let mut rows = vec![];
        let (m, out) = run_files(&inputs(&c), FlowConfig::default(), &[], &mut |r| rows.push(r)).expect("run");
        assert_eq!(out[0].tap.rtps_skipped, 1);
        assert_eq!((out[1].tap.measured, out[1].tap.rtps_skipped), (20, 1)); // 18 delivered + 1 duplicate + 1 only B sees
        let f: Vec<&FlowPacketRow> = rows.iter().filter(|r| r.dst.port() == 5000).collect();
        assert_eq!(f.len(), 20);
        for (i, r) in f.iter().enumerate() {
            assert_eq!(r.send_index, Some(i as u64));
            assert_eq!(r.ip_id, 100 + i as u32);
            assert_eq!(r.crc32, crc32fast::hash(&payload(i)));
            let (s, rv) = c.times[i];
            assert_eq!(r.send_ts_ns, Some(s));
            match rv {
                None => assert_eq!((r.status, r.delay_ns), (PacketStatus::Lost, None)),
                Some(rv) => {
                    assert_eq!(r.status, PacketStatus::Delivered);
                    assert_eq!(r.recv_ts_ns, Some(rv + TAI));
                    assert_eq!(r.delay_ns, Some(rv - s), "packet {i}");
                    let prev = (i > 0).then(|| c.times[i - 1]).and_then(|(ps, pr)| pr.map(|pr| pr - ps));
                    assert_eq!(r.jitter_ns, prev.map(|p| (rv - s) - p), "packet {i}");
                }
            }
            assert_eq!(r.ip_frags, if i == 5 { 3 } else { 1 });
            assert_eq!(r.duplicates, u32::from(i == 7));
            assert_eq!(r.reordered, i == 14, "packet {i}");
        }
        let s = m.summaries();
        assert_eq!(s.len(), 1, "the one-point flow has no receiver");
        let s = &s[0];
        assert_eq!((s.sent, s.delivered, s.lost, s.duplicates, s.reordered, s.unsent), (20, 18, 2, 1, 1, 0));
        assert_eq!(s.jitter.count, 15); // pairs (i-1, i) both delivered: 1-2, 5-10, 13-19
        assert_eq!(m.one_point_flows(), 2);
        assert_eq!(m.stats.one_point_packets, 2);
        let _ = std::fs::remove_dir_all(&c.dir);
    }

    #[test]
    fn rtps_is_measured_with_include_rtps() {
        let c = build("rtps");
        let mut rows = vec![];
        let cfg = FlowConfig { include_rtps: true, ..FlowConfig::default() };
        run_files(&inputs(&c), cfg, &[], &mut |r| rows.push(r)).expect("run");
        let r: Vec<_> = rows.iter().filter(|r| r.dst.port() == 7400).collect();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].delay_ns, Some(200));
        let _ = std::fs::remove_dir_all(&c.dir);
    }

    #[test]
    fn caps_evict_in_order_and_count() {
        let c = build("caps");
        let mut rows = vec![];
        let cfg = FlowConfig { max_pending: 4, ..FlowConfig::default() };
        let (m, _) = run_files(&inputs(&c), cfg, &[], &mut |r| rows.push(r)).expect("run");
        assert!(m.stats.pending_evicted > 0);
        // every packet is judged or counted as evicted, none silently lost
        let judged = rows.len() as u64 + m.stats.one_point_packets;
        assert!(judged + m.stats.pending_evicted >= 20, "{judged} + {}", m.stats.pending_evicted);
        let _ = std::fs::remove_dir_all(&c.dir);
    }

    #[test]
    fn errors_name_the_problem() {
        let c = build("errors");
        let i = inputs(&c);
        assert!(matches!(run_files(&i[..1], FlowConfig::default(), &[], &mut |_| {}), Err(FlowError::TooFewCaptures(1))));
        let same = vec![i[0].clone(), FlowInput { name: "x".into(), ..i[0].clone() }];
        assert!(matches!(run_files(&same, FlowConfig::default(), &[], &mut |_| {}), Err(FlowError::SameFile(..))));
        let named = vec![i[0].clone(), FlowInput { name: "a".into(), ..i[1].clone() }];
        let e = run_files(&named, FlowConfig::default(), &[], &mut |_| {}).err().expect("error").to_string();
        assert!(e.contains("both named \"a\""), "{e}");
        let _ = std::fs::remove_dir_all(&c.dir);
    }
}
