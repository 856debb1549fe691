//! Frame-level discrete-event simulator of egress ports in series.
//!
//! Model (see docs/tsn.md for the full description):
//! - A *port* is one egress link: rate, propagation delay, per-class FIFO
//!   queues (PCP → traffic class map), strict priority among classes whose
//!   frame may start, an optional gate control list (taprio semantics with
//!   the length-aware guard band) and optional CBS per class. Transmission
//!   is non-preemptive. Time is kept in integer picoseconds, so
//!   serialisation times at 100M/1G/2.5G/10G are exact.
//! - A *source* releases messages (a DDS sample, an iperf3 datagram, an IVN
//!   frame) periodically. Each message is a fixed list of Ethernet frames
//!   (see [`crate::frame`]). The host hands frames to the first port's queue
//!   while the socket's bytes in the queue stay within its send buffer
//!   (Linux charges an skb to its socket until the NIC has sent it; a
//!   blocking sender waits), so a 2.8 MB sample and a 4.5 MB iperf3 burst
//!   interleave in a shared FIFO rather than one waiting for the whole of
//!   the other.
//! - Frames are forwarded store-and-forward: the next port sees a frame when
//!   its last bit has arrived, plus that port's processing delay.
//! - Latency of a message = last bit of its last frame received at the end
//!   of the path − its first frame handed to the first port (the DDS message
//!   latency of thesis 3.2.5 when the sender captures at the NIC).

use crate::frame::{bytes_to_ps, busy_bytes, tx_bytes, MessageFrames};
use crate::gcl::Gcl;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// CBS parameters in the units `tc cbs` takes (kbit/s, bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbsConfig {
    pub idleslope_kbps: i64,
    pub sendslope_kbps: i64,
    pub hicredit_bytes: i64,
    pub locredit_bytes: i64,
}

#[derive(Debug, Clone)]
pub struct PortSpec {
    pub name: String,
    pub rate_bps: u64,
    pub propagation_ps: u64,
    /// Delay between a frame's arrival at this port's node and its enqueue here.
    pub processing_ps: u64,
    pub num_tc: usize,
    pub pcp_to_tc: [u8; 8],
    /// Frames per class queue; a frame arriving to a full queue is dropped.
    pub queue_limit: usize,
    /// Traffic classes from the most to the least urgent.
    pub priority_order: Vec<usize>,
    pub gcl: Option<Gcl>,
    pub cbs: Vec<Option<CbsConfig>>,
    /// A software token-bucket shaper on a link without a line rate (Linux
    /// `tbf` on a veth, as the lab shapes its links) instead of an Ethernet
    /// port: a frame costs its bytes without the FCS at `rate_bps` (no
    /// preamble, no inter-frame gap), leaves at once when the bucket holds
    /// that many bytes, and the bucket holds at most this many bytes (full
    /// at the start). `None`: an Ethernet port at `rate_bps`.
    pub shaper_burst: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// Report group (one row of output; IVN patterns have several streams per group).
    pub group: usize,
    pub path: Vec<usize>,
    pub pcp: u8,
    pub period_ps: u64,
    pub offset_ps: u64,
    pub msgs_per_release: u64,
    pub frames: MessageFrames,
    /// Bytes of this source allowed in the first port's queue; 0 = unlimited.
    pub socket_buffer: u64,
    /// Writer and reader host times; all zero = an ideal host (latency from
    /// the first frame handed to the port, as without the field).
    pub host: HostTiming,
}

/// Host-side times of a DDS writer and reader (`crate::calibrate` fits them
/// from a lab run). With any of them non-zero a message's latency runs from
/// its release (the write call) to the last bit received plus `post_ps`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct HostTiming {
    /// Release → first frame handed to the first port (serialisation and the sender's stack).
    pub pre_ps: u64,
    /// Writer pacing: datagram k of a message is handed no earlier than
    /// `pre_ps + k × datagram_ps` after its release (the writer's time per
    /// datagram; the socket buffer can hold it back further).
    pub datagram_ps: u64,
    /// Last bit of the last frame received → the sample delivered to the reader.
    pub post_ps: u64,
}

impl HostTiming {
    pub fn is_ideal(&self) -> bool {
        *self == HostTiming::default()
    }
}

#[derive(Debug, Clone)]
pub struct SimInput {
    pub ports: Vec<PortSpec>,
    pub sources: Vec<SourceSpec>,
    pub groups: usize,
    /// Sources release messages in [0, duration).
    pub duration_ps: u64,
    /// Simulation stops at duration + drain; messages not delivered by then are "unfinished".
    pub drain_ps: u64,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    src: u32,
    msg: u32,
    l2: u32,
    hop: u16,
    last: bool,
    first_ps: u64,
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Release(u32),
    Wake(u32, u64),
    /// A paced source may hand its next datagram.
    Admit(u32),
    TxEnd(u32),
    Arrive(u32, Frame),
}

struct Entry {
    t: u64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.t == o.t && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // Min-heap on (time, insertion order): equal-time events run in the order scheduled.
        o.t.cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

/// Credit in bit·ps (bits × 10¹²), so slopes in bit/s times picoseconds are exact.
#[derive(Debug, Clone, Copy)]
struct Cbs {
    idle: i128,
    send: i128,
    hi: i128,
    lo: i128,
    credit: i128,
    last_ps: u64,
    transmitting: bool,
}

impl Cbs {
    fn new(c: CbsConfig) -> Self {
        Cbs {
            idle: c.idleslope_kbps as i128 * 1000,
            send: c.sendslope_kbps as i128 * 1000,
            hi: c.hicredit_bytes as i128 * 8 * 1_000_000_000_000,
            lo: c.locredit_bytes as i128 * 8 * 1_000_000_000_000,
            credit: 0,
            last_ps: 0,
            transmitting: false,
        }
    }
    fn advance(&mut self, now: u64, queued: bool) {
        let dt = (now - self.last_ps) as i128;
        self.last_ps = now;
        if self.transmitting {
            self.credit = (self.credit + self.send * dt).max(self.lo);
        } else if queued {
            self.credit = (self.credit + self.idle * dt).min(self.hi);
        } else if self.credit > 0 {
            self.credit = 0;
        } else {
            self.credit = (self.credit + self.idle * dt).min(0);
        }
    }
    /// Picoseconds from now until the credit reaches zero while waiting.
    fn wait_ps(&self) -> u64 {
        if self.credit >= 0 {
            0
        } else {
            ((-self.credit + self.idle - 1) / self.idle) as u64
        }
    }
}

struct Port {
    queues: Vec<VecDeque<Frame>>,
    busy: bool,
    current: Option<Frame>,
    current_tc: usize,
    wake_gen: u64,
    cbs: Vec<Option<Cbs>>,
    busy_ps: u64,
    frames: u64,
    drops: u64,
    max_queue: Vec<usize>,
    /// Shaper ports: the bucket's content as transmission time at the rate
    /// (ps), as of `tokens_at`.
    tokens_ps: u64,
    tokens_at: u64,
}

impl Port {
    /// Shaper ports: the bucket at `now`, and the wait before it holds `cost_ps`.
    fn shaper_wait(&mut self, now: u64, burst_ps: u64, cost_ps: u64) -> u64 {
        self.tokens_ps = (self.tokens_ps + (now - self.tokens_at)).min(burst_ps);
        self.tokens_at = now;
        cost_ps.saturating_sub(self.tokens_ps)
    }
}

struct Source {
    backlog: u64,
    cursor: usize,
    msg_seq: u32,
    cur_first_ps: u64,
    inflight: u64,
    lost_msg: Option<u32>,
    /// Release times of the messages not yet started (paced sources only).
    releases: VecDeque<u64>,
    cur_release_ps: u64,
    /// Datagram of the current message the cursor is in.
    dgram: usize,
    /// An `Admit` event is pending at this time.
    admit_at: Option<u64>,
}

/// Per report group: what happened to its messages.
#[derive(Debug, Clone, Default)]
pub struct GroupResult {
    pub released: u64,
    pub delivered: u64,
    pub lost: u64,
    pub dropped_frames: u64,
    /// Latency of each delivered message, ps, in delivery order per source.
    pub latencies_ps: Vec<u64>,
    /// Bosk et al. Eq. 10 per source: d(X) − d(X−1), ps.
    pub jitter_ps: Vec<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct PortResult {
    pub busy_ps: u64,
    pub frames: u64,
    pub drops: u64,
    pub max_queue: Vec<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct SimResult {
    pub groups: Vec<GroupResult>,
    pub ports: Vec<PortResult>,
    pub events: u64,
    pub end_ps: u64,
}

pub struct Sim<'a> {
    inp: &'a SimInput,
    heap: BinaryHeap<Entry>,
    seq: u64,
    ports: Vec<Port>,
    sources: Vec<Source>,
    last_delivery: Vec<Option<u64>>,
    res: SimResult,
    now: u64,
}

/// The bytes a Linux shaper charges for a MAC frame: the socket buffer's
/// length, header through payload, without the FCS.
fn shaper_bytes(l2: u64) -> u64 {
    l2.saturating_sub(crate::frame::FCS)
}

impl<'a> Sim<'a> {
    pub fn new(inp: &'a SimInput) -> Self {
        let ports = inp
            .ports
            .iter()
            .map(|p| Port {
                queues: (0..p.num_tc).map(|_| VecDeque::new()).collect(),
                busy: false,
                current: None,
                current_tc: 0,
                wake_gen: 0,
                cbs: p.cbs.iter().map(|c| c.map(Cbs::new)).collect(),
                busy_ps: 0,
                frames: 0,
                drops: 0,
                max_queue: vec![0; p.num_tc],
                tokens_ps: p.shaper_burst.map_or(0, |b| bytes_to_ps(b, p.rate_bps)),
                tokens_at: 0,
            })
            .collect();
        let sources = inp
            .sources
            .iter()
            .map(|_| Source {
                backlog: 0,
                cursor: 0,
                msg_seq: 0,
                cur_first_ps: 0,
                inflight: 0,
                lost_msg: None,
                releases: VecDeque::new(),
                cur_release_ps: 0,
                dgram: 0,
                admit_at: None,
            })
            .collect();
        let mut res = SimResult { groups: vec![GroupResult::default(); inp.groups], ..Default::default() };
        res.ports = vec![PortResult::default(); inp.ports.len()];
        Sim {
            inp,
            heap: BinaryHeap::with_capacity(1024),
            seq: 0,
            ports,
            sources,
            last_delivery: vec![None; inp.sources.len()],
            res,
            now: 0,
        }
    }

    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry { t, seq: self.seq, ev });
    }

    pub fn run(mut self) -> SimResult {
        for (i, s) in self.inp.sources.iter().enumerate() {
            if s.offset_ps < self.inp.duration_ps {
                self.push(s.offset_ps, Ev::Release(i as u32));
            }
        }
        let end = self.inp.duration_ps + self.inp.drain_ps;
        while let Some(Entry { t, ev, .. }) = self.heap.pop() {
            if t > end {
                break;
            }
            self.now = t;
            self.res.events += 1;
            match ev {
                Ev::Release(s) => self.release(s as usize),
                Ev::Wake(p, gen) => {
                    if self.ports[p as usize].wake_gen == gen {
                        self.try_transmit(p as usize);
                    }
                }
                Ev::Admit(s) => {
                    if self.sources[s as usize].admit_at == Some(t) {
                        self.sources[s as usize].admit_at = None;
                        self.admit(s as usize);
                    }
                }
                Ev::TxEnd(p) => self.tx_end(p as usize),
                Ev::Arrive(p, f) => {
                    self.enqueue(p as usize, f);
                    self.try_transmit(p as usize);
                }
            }
        }
        self.res.end_ps = self.now;
        for (i, p) in self.ports.iter().enumerate() {
            self.res.ports[i] =
                PortResult { busy_ps: p.busy_ps, frames: p.frames, drops: p.drops, max_queue: p.max_queue.clone() };
        }
        self.res
    }

    fn release(&mut self, s: usize) {
        let spec = &self.inp.sources[s];
        let next = self.now + spec.period_ps;
        if next < self.inp.duration_ps {
            self.push(next, Ev::Release(s as u32));
        }
        self.sources[s].backlog += spec.msgs_per_release;
        if !spec.host.is_ideal() {
            let now = self.now;
            self.sources[s].releases.extend(std::iter::repeat(now).take(spec.msgs_per_release as usize));
        }
        self.res.groups[spec.group].released += spec.msgs_per_release;
        self.admit(s);
    }

    /// Hands frames of source `s` to its first port while its socket buffer allows.
    fn admit(&mut self, s: usize) {
        let spec = &self.inp.sources[s];
        let port = spec.path[0];
        let n = spec.frames.l2.len();
        loop {
            let src = &mut self.sources[s];
            if src.backlog == 0 {
                break;
            }
            let l2 = spec.frames.l2[src.cursor];
            if spec.socket_buffer > 0 && src.inflight > 0 && src.inflight + l2 as u64 > spec.socket_buffer {
                break;
            }
            let paced = !spec.host.is_ideal();
            if paced {
                // Writer pacing: datagram k no earlier than release + pre + k·datagram.
                let release = if src.cursor == 0 { src.releases.front().copied().unwrap_or(self.now) } else { src.cur_release_ps };
                let k = if src.cursor == 0 { 0 } else { src.dgram };
                let at = release + spec.host.pre_ps + k as u64 * spec.host.datagram_ps;
                if at > self.now {
                    if src.admit_at.is_none_or(|a| a > at) {
                        src.admit_at = Some(at);
                        self.push(at, Ev::Admit(s as u32));
                    }
                    break;
                }
            }
            if src.cursor == 0 {
                src.cur_first_ps = self.now;
                src.msg_seq = src.msg_seq.wrapping_add(1);
                src.dgram = 0;
                if paced {
                    src.cur_release_ps = src.releases.pop_front().unwrap_or(self.now);
                    src.cur_first_ps = src.cur_release_ps;
                }
            }
            let last = src.cursor + 1 == n;
            let f = Frame { src: s as u32, msg: src.msg_seq, l2, hop: 0, last, first_ps: src.cur_first_ps };
            if last {
                src.cursor = 0;
                src.backlog -= 1;
            } else {
                src.cursor += 1;
                if spec.frames.datagram_ends.get(src.dgram).is_some_and(|&e| e as usize == src.cursor) {
                    src.dgram += 1;
                }
            }
            if self.enqueue(port, f) {
                self.sources[s].inflight += l2 as u64;
            }
        }
        self.try_transmit(port);
    }

    fn enqueue(&mut self, p: usize, f: Frame) -> bool {
        let spec = &self.inp.ports[p];
        let pcp = self.inp.sources[f.src as usize].pcp;
        let tc = spec.pcp_to_tc[pcp as usize & 7] as usize;
        let now = self.now;
        let port = &mut self.ports[p];
        if port.queues[tc].len() >= spec.queue_limit {
            port.drops += 1;
            let src = &mut self.sources[f.src as usize];
            let g = self.inp.sources[f.src as usize].group;
            self.res.groups[g].dropped_frames += 1;
            if src.lost_msg != Some(f.msg) {
                src.lost_msg = Some(f.msg);
                self.res.groups[g].lost += 1;
            }
            return false;
        }
        if let Some(c) = port.cbs[tc].as_mut() {
            c.advance(now, !port.queues[tc].is_empty());
        }
        port.queues[tc].push_back(f);
        let l = port.queues[tc].len();
        if l > port.max_queue[tc] {
            port.max_queue[tc] = l;
        }
        true
    }

    fn try_transmit(&mut self, p: usize) {
        let now = self.now;
        let spec = &self.inp.ports[p];
        let port = &mut self.ports[p];
        if port.busy {
            return;
        }
        for (tc, c) in port.cbs.iter_mut().enumerate() {
            if let Some(c) = c {
                c.advance(now, !port.queues[tc].is_empty());
            }
        }
        let mut earliest = u64::MAX;
        for &tc in &spec.priority_order {
            let Some(head) = port.queues[tc].front() else { continue };
            let need = bytes_to_ps(tx_bytes(head.l2 as u64), spec.rate_bps);
            let mut e = now;
            if let Some(b) = spec.shaper_burst {
                let cost = bytes_to_ps(shaper_bytes(head.l2 as u64), spec.rate_bps);
                e += port.shaper_wait(now, bytes_to_ps(b, spec.rate_bps).max(cost), cost);
            }
            if let Some(c) = &port.cbs[tc] {
                e += c.wait_ps();
            }
            if let Some(g) = &spec.gcl {
                // Validated at load: every class's frames fit its longest window.
                e = g.next_fit(tc, e, need).unwrap_or(u64::MAX);
            }
            if e == now {
                self.start(p, tc);
                return;
            }
            earliest = earliest.min(e);
        }
        if earliest != u64::MAX {
            let port = &mut self.ports[p];
            port.wake_gen += 1;
            let gen = port.wake_gen;
            self.push(earliest, Ev::Wake(p as u32, gen));
        }
    }

    fn start(&mut self, p: usize, tc: usize) {
        let now = self.now;
        let spec = &self.inp.ports[p];
        let port = &mut self.ports[p];
        let f = port.queues[tc].pop_front().expect("head frame");
        if let Some(c) = port.cbs[tc].as_mut() {
            c.transmitting = true;
        }
        let (need, busy) = match spec.shaper_burst {
            // the bucket pays for the frame; the veth hands it over at once
            Some(_) => {
                port.tokens_ps -= bytes_to_ps(shaper_bytes(f.l2 as u64), spec.rate_bps).min(port.tokens_ps);
                (0, 0)
            }
            None => (bytes_to_ps(tx_bytes(f.l2 as u64), spec.rate_bps), bytes_to_ps(busy_bytes(f.l2 as u64), spec.rate_bps)),
        };
        port.busy = true;
        port.current = Some(f);
        port.current_tc = tc;
        port.busy_ps += busy;
        port.frames += 1;
        self.push(now + busy, Ev::TxEnd(p as u32));
        let rx = now + need + spec.propagation_ps;
        let src = &self.inp.sources[f.src as usize];
        let hop = f.hop as usize + 1;
        if hop < src.path.len() {
            let next = src.path[hop];
            let mut nf = f;
            nf.hop = hop as u16;
            self.push(rx + self.inp.ports[next].processing_ps, Ev::Arrive(next as u32, nf));
        } else if f.last {
            self.deliver(f, rx);
        }
    }

    fn deliver(&mut self, f: Frame, rx: u64) {
        let s = f.src as usize;
        if self.sources[s].lost_msg == Some(f.msg) {
            return;
        }
        let g = self.inp.sources[s].group;
        let d = rx - f.first_ps + self.inp.sources[s].host.post_ps;
        let gr = &mut self.res.groups[g];
        gr.delivered += 1;
        gr.latencies_ps.push(d);
        if let Some(prev) = self.last_delivery[s] {
            gr.jitter_ps.push(d as i64 - prev as i64);
        }
        self.last_delivery[s] = Some(d);
    }

    fn tx_end(&mut self, p: usize) {
        let now = self.now;
        let port = &mut self.ports[p];
        let f = port.current.take().expect("frame in flight");
        let tc = port.current_tc;
        port.busy = false;
        let queued = !port.queues[tc].is_empty();
        if let Some(c) = port.cbs[tc].as_mut() {
            c.advance(now, queued);
            c.transmitting = false;
            c.advance(now, queued);
        }
        if f.hop == 0 {
            let s = f.src as usize;
            self.sources[s].inflight -= f.l2 as u64;
            if self.sources[s].backlog > 0 {
                self.admit(s);
            }
        }
        self.try_transmit(p);
    }
}

pub fn run(inp: &SimInput) -> SimResult {
    Sim::new(inp).run()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Framing, RtpsOptions};
    use crate::gcl::GateEntry;

    fn port(rate: u64, gcl: Option<Gcl>, cbs: Vec<Option<CbsConfig>>) -> PortSpec {
        let num_tc = cbs.len().max(gcl.as_ref().map(|g| g.num_tc()).unwrap_or(1));
        PortSpec {
            name: "p".into(),
            rate_bps: rate,
            propagation_ps: 0,
            processing_ps: 0,
            num_tc,
            pcp_to_tc: [0, 0, 0, 1, 0, 1, 0, 0].map(|t| if (t as usize) < num_tc { t } else { 0 }),
            queue_limit: usize::MAX,
            priority_order: (0..num_tc).rev().collect(),
            gcl,
            cbs: if cbs.is_empty() { vec![None; num_tc] } else { cbs },
            shaper_burst: None,
        }
    }

    fn source(path: Vec<usize>, pcp: u8, period_ps: u64, frames: MessageFrames) -> SourceSpec {
        SourceSpec { group: 0, path, pcp, period_ps, offset_ps: 0, msgs_per_release: 1, frames, socket_buffer: 0, host: HostTiming::default() }
    }

    /// Oracle: hand derivation. A 36-byte DDS sample (thesis /drive) is one
    /// frame of 142 MAC bytes (see frame.rs); on the wire before the last bit
    /// arrives: 8 + 142 = 150 bytes = 1200 bits = 480 ns at 2.5 Gbit/s.
    #[test]
    fn single_flow_on_idle_link_is_pure_serialisation() {
        let m = MessageFrames::dds_sample(&Framing::default(), &RtpsOptions::default(), 36).unwrap();
        let inp = SimInput {
            ports: vec![port(2_500_000_000, None, vec![])],
            sources: vec![source(vec![0], 5, 34_482_758_620, m)],
            groups: 1,
            duration_ps: 1_000_000_000_000,
            drain_ps: 1_000_000_000,
        };
        let r = run(&inp);
        // Releases at k × 34.48 ms for k = 0..=29 (29 × period < 1 s).
        assert_eq!(r.groups[0].delivered, 30);
        assert!(r.groups[0].latencies_ps.iter().all(|&d| d == 480_000));
        assert!(r.groups[0].jitter_ps.iter().all(|&j| j == 0));
    }

    /// Oracle: hand derivation of Linux tbf's accounting (net/sched/sch_tbf.c:
    /// a packet leaves when the bucket holds its length, header to payload, no
    /// FCS). 1 Gbit/s, a 10 000-byte bucket, one UDP datagram of 30 000 bytes:
    /// 21 IP fragments of 1514 bytes (1480 of payload each) and a last of
    /// 30 008 - 20 × 1480 = 408 + 20 + 14 = 442 bytes. The first 6 frames
    /// (9084 B) leave at once; the 7th waits for 1514 - 916 = 598 B = 4.784 us,
    /// and so on: the last one leaves when the bucket has paid for everything
    /// beyond its 10 000 bytes: 20 × 1514 + 442 - 10 000 = 20 722 B = 165.776 us.
    /// A second message a whole second later finds the bucket full again.
    #[test]
    fn shaper_port_pays_from_its_bucket() {
        let m = MessageFrames::udp(&Framing { vlan: false, mtu: 1500 }, 30_000).unwrap();
        assert_eq!(m.l2.len(), 21);
        assert_eq!(*m.l2.last().unwrap(), 442 + 4);
        let mut p = port(1_000_000_000, None, vec![]);
        p.shaper_burst = Some(10_000);
        let inp = SimInput {
            ports: vec![p],
            sources: vec![source(vec![0], 0, 1_000_000_000_000, m)],
            groups: 1,
            duration_ps: 1_500_000_000_000,
            drain_ps: 1_000_000_000,
        };
        let r = run(&inp);
        assert_eq!(r.groups[0].delivered, 2);
        assert!(r.groups[0].latencies_ps.iter().all(|&d| d == 165_776_000), "{:?}", r.groups[0].latencies_ps);
        // the same message on an Ethernet port of the same rate: every frame serialised, preamble to gap
        let mut e = inp.clone();
        e.ports[0].shaper_burst = None;
        let r = run(&e);
        let wire: u64 = 20 * (8 + 1518 + 12) + 8 + 446;
        assert_eq!(r.groups[0].latencies_ps[0], wire * 8 * 1000, "{:?}", r.groups[0].latencies_ps);
    }

    /// Oracle: hand derivation. Two hops of 1 Gbit/s, 5 us propagation each,
    /// 1 us processing at the second: an iperf3 datagram of 1400 B is a
    /// 1450-byte frame, 1458 bytes before its last bit = 11.664 us per hop.
    /// Store-and-forward: 2 × 11.664 + 2 × 5 + 1 = 34.328 us.
    #[test]
    fn store_and_forward_over_two_hops() {
        let m = MessageFrames::udp(&Framing::default(), 1400).unwrap();
        let mut p1 = port(1_000_000_000, None, vec![]);
        p1.propagation_ps = 5_000_000;
        let mut p2 = p1.clone();
        p2.processing_ps = 1_000_000;
        let inp = SimInput {
            ports: vec![p1, p2],
            sources: vec![source(vec![0, 1], 0, 100_000_000, m)],
            groups: 1,
            duration_ps: 1_000_000_000,
            drain_ps: 1_000_000_000,
        };
        let r = run(&inp);
        assert_eq!(r.groups[0].delivered, 10);
        assert!(r.groups[0].latencies_ps.iter().all(|&d| d == 34_328_000), "{:?}", r.groups[0].latencies_ps);
    }

    /// Oracle: hand derivation of the guard band. 2.5 Gbit/s, TAS 50 % of
    /// 500 us: 250 us windows. A full frame (1500-byte IP packet, VLAN tag:
    /// 1522 MAC bytes) keeps the link busy 1542 B = 4934.4 ns incl. IFG and
    /// its last bit leaves after 1530 B = 4896 ns. 50 frames need
    /// 49 × 4934.4 + 4896 = 246 681.6 ns <= 250 us; a 51st would end at
    /// 251 616 ns > 250 us: 50 frames per window. A message of 120 frames
    /// released at a window start uses 3 windows and ends in the third:
    /// 2 cycles + 19 × 4934.4 + 4896 ns.
    #[test]
    fn tas_window_count_is_exact() {
        let m = MessageFrames { l2: vec![1522; 120], ..Default::default() };
        let gcl = Gcl::new(
            vec![GateEntry { mask: 0b10, duration_ps: 250_000_000 }, GateEntry { mask: 0b01, duration_ps: 250_000_000 }],
            0,
            2,
        )
        .unwrap();
        let inp = SimInput {
            ports: vec![port(2_500_000_000, Some(gcl), vec![])],
            sources: vec![source(vec![0], 5, 100_000_000_000, m)],
            groups: 1,
            duration_ps: 1,
            drain_ps: 10_000_000_000,
        };
        let r = run(&inp);
        let want = 2 * 500_000_000 + 19 * 4_934_400 + 4_896_000;
        assert_eq!(r.groups[0].latencies_ps, vec![want]);
    }

    /// Oracle: the CBS steady state. A saturated class alternates sending
    /// (credit falls at sendSlope = idleSlope − rate) and waiting (rises at
    /// idleSlope); zero net credit per period gives a transmitting share of
    /// idleSlope / rate, i.e. a long-run wire throughput equal to idleSlope.
    #[test]
    fn cbs_long_run_throughput_equals_idleslope() {
        let framing = Framing::default();
        let m = MessageFrames::udp(&framing, 1180).unwrap(); // 1250-byte PHY frame (Bosk et al. EX_CS)
        assert_eq!(m.breakdown.wire_bytes, 1250);
        for idle_kbps in [100_000i64, 250_000, 20_000] {
            let cbs = CbsConfig {
                idleslope_kbps: idle_kbps,
                sendslope_kbps: idle_kbps - 1_000_000,
                hicredit_bytes: 155,
                locredit_bytes: -1250,
            };
            let p = port(1_000_000_000, None, vec![None, Some(cbs)]);
            // Offer far more than the reservation: 1 Gbit/s worth of frames in TC1.
            let mut s = source(vec![0], 3, 10_000_000, m.clone());
            s.msgs_per_release = 1;
            let duration = 2_000_000_000_000u64; // 2 s
            let inp = SimInput { ports: vec![p], sources: vec![s], groups: 1, duration_ps: duration, drain_ps: 0 };
            let r = run(&inp);
            let bits = r.groups[0].delivered as f64 * 1250.0 * 8.0;
            let rate = bits / (duration as f64 / 1e12);
            let want = idle_kbps as f64 * 1000.0;
            assert!((rate - want).abs() / want < 0.002, "idleslope {want}: measured {rate}");
        }
    }

    /// Strict priority, non-preemptive: a high-priority frame that arrives
    /// while a low-priority frame is on the wire waits for it to finish, and
    /// then overtakes every queued low-priority frame.
    #[test]
    fn strict_priority_is_non_preemptive() {
        let framing = Framing { vlan: false, mtu: 1500 };
        let big = MessageFrames::udp(&framing, 1472).unwrap(); // 1518 MAC bytes, 1538 busy
        let small = MessageFrames::udp(&framing, 18).unwrap(); // 64-byte frame
        let p = port(1_000_000_000, None, vec![None, None]);
        let mut lo = source(vec![0], 0, 1_000_000_000, big);
        lo.msgs_per_release = 10;
        lo.group = 0;
        let mut hi = source(vec![0], 3, 1_000_000_000, small);
        hi.offset_ps = 1_000_000; // 1 us into the first low-priority frame
        hi.group = 1;
        let inp =
            SimInput { ports: vec![p], sources: vec![lo, hi], groups: 2, duration_ps: 2_000_000, drain_ps: 1_000_000_000 };
        let r = run(&inp);
        // First low frame busy until 1538 B × 8 ns = 12.304 us; the small frame then takes 72 B × 8 ns.
        assert_eq!(r.groups[1].latencies_ps, vec![12_304_000 - 1_000_000 + 576_000]);
    }

    /// Oracle: hand derivation. Three 1000-byte frames, one per datagram, at
    /// 1 Gbit/s (1008 B before the last bit = 8.064 us; busy 1020 B = 8.16 us).
    /// With pre = 10 us and 100 us per datagram the writer hands datagram 2
    /// at 210 us; latency = 210 + 8.064 + post 5 = 223.064 us. With a 100 us
    /// gate window every 1 ms opening at 0 the pace does not matter for
    /// datagram 0 (sent at 10 us), but datagrams 1 and 2 (ready at 110, 210 us)
    /// wait for the next window at 1000 us: 1000 + 8.16 + 8.064 + 5 us.
    #[test]
    fn host_timing_paces_datagrams_and_adds_pre_and_post() {
        let m = MessageFrames { l2: vec![1000; 3], datagram_ends: vec![1, 2, 3], ..Default::default() };
        let host = HostTiming { pre_ps: 10_000_000, datagram_ps: 100_000_000, post_ps: 5_000_000 };
        let mut src = source(vec![0], 5, 1_000_000_000_000, m.clone());
        src.host = host;
        let inp = SimInput { ports: vec![port(1_000_000_000, None, vec![])], sources: vec![src.clone()], groups: 1, duration_ps: 1, drain_ps: 1_000_000_000_000 };
        assert_eq!(run(&inp).groups[0].latencies_ps, vec![223_064_000]);
        let gcl = Gcl::new(vec![GateEntry { mask: 0b10, duration_ps: 100_000_000 }, GateEntry { mask: 0b01, duration_ps: 900_000_000 }], 0, 2).unwrap();
        let inp = SimInput { ports: vec![port(1_000_000_000, Some(gcl), vec![])], sources: vec![src], groups: 1, duration_ps: 1, drain_ps: 1_000_000_000_000 };
        assert_eq!(run(&inp).groups[0].latencies_ps, vec![1_000_000_000 + 8_160_000 + 8_064_000 + 5_000_000]);
        // An ideal host is the old model: latency from the first frame's hand-off.
        let mut ideal = source(vec![0], 5, 1_000_000_000_000, m);
        ideal.offset_ps = 0;
        let inp = SimInput { ports: vec![port(1_000_000_000, None, vec![])], sources: vec![ideal], groups: 1, duration_ps: 1, drain_ps: 1_000_000_000_000 };
        assert_eq!(run(&inp).groups[0].latencies_ps, vec![8_160_000 * 2 + 8_064_000]);
    }
}
