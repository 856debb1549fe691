//! Sample completion at one capture point: one record per (writer, sn) with
//! first and last capture time, fragments seen/expected, bytes, IP
//! fragments, and retransmitted fragments — the unit every latency, loss and
//! repair analysis works on.
//!
//! A sample is complete when every fragment has been seen towards one
//! destination. A fragmented sample's record is emitted after a linger time
//! (so that late retransmissions are still counted) or, if it never
//! completes, after a timeout; state is capped and evictions are counted.
//! An unfragmented sample (DATA) is complete when first seen: its record is
//! emitted at once, and only a compact entry is kept for the linger time; if
//! the sample is sent again towards the same destination, a correction record
//! (`closed_by = "retransmission"`) reports the retransmission.
//!
//! Everything is capped by [`SampleConfig`]: open samples, destinations per
//! sample, and the bytes of all fragment bitmaps together (bitmaps grow with
//! the fragments actually received, not with the count a sample announces).
//! What does not fit is counted in [`SampleStats`].

use crate::bounded::BoundedMap;
use crate::discovery::TopicNames;
use crate::events::{SubmsgEvent, TrafficType};
use crate::record::Value;
use crate::ros_graph::RosNode;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::Guid;
use serde::Serialize;
use smallvec::SmallVec;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(Debug, Clone, Copy)]
pub struct SampleConfig {
    /// How long a complete sample stays open to count late retransmissions.
    pub linger_ns: i64,
    /// An incomplete sample with no activity for this long is emitted as incomplete.
    pub timeout_ns: i64,
    /// Samples open at once (and unfragmented samples remembered for their
    /// linger); the least recently active is closed first (`closed_by = evicted`).
    pub max_samples: usize,
    /// Samples announcing more fragments than this are not tracked fragment by fragment.
    pub max_fragments: u32,
    /// Destinations tracked per sample (each with its own fragment bitmap);
    /// copies to further destinations are counted but not checked for
    /// completeness or retransmission ([`SampleStats::untracked_destinations`]).
    pub max_destinations: usize,
    /// Bytes all fragment bitmaps may hold together; over it the least
    /// recently active samples are closed early ([`SampleStats::evicted_for_memory`]).
    pub max_fragment_bytes: usize,
}

impl Default for SampleConfig {
    fn default() -> Self {
        SampleConfig {
            linger_ns: 1_000_000_000,
            timeout_ns: 5_000_000_000,
            max_samples: 1 << 16,
            max_fragments: 1 << 20,
            max_destinations: 64,
            max_fragment_bytes: 32 << 20,
        }
    }
}

/// One DDS sample as seen at one capture point.
#[derive(Debug, Clone)]
pub struct SampleRecord {
    pub capture: Arc<str>,
    pub writer_id: Guid,
    pub sn: i64,
    pub topic: Option<Arc<TopicNames>>,
    /// The ROS 2 node owning the writer (from `ros_discovery_info` in this capture), once known.
    pub node: Option<Arc<RosNode>>,
    pub traffic_type: TrafficType,
    /// Capture time of the first DATA/DATA_FRAG of the sample (datagram completion, as tshark times it).
    pub first_ts_ns: i64,
    /// Capture time of the first IP fragment of the first datagram.
    pub first_ip_ts_ns: i64,
    /// Capture time at which the sample became complete, or of its last submessage if it never did.
    pub last_ts_ns: i64,
    pub complete: bool,
    pub first_frame: u64,
    pub last_frame: u64,
    pub sample_size: u32,
    pub fragment_size: Option<u16>,
    pub frags_expected: u32,
    pub frags_seen: u32,
    pub submsgs: u32,
    pub ip_frags: u32,
    pub bytes: u64,
    /// Fragments seen again towards the same destination.
    pub retransmitted_frags: u32,
    pub retransmitted_bytes: u64,
    pub destinations: u16,
    pub nack_frags: u32,
    pub pcp: Option<u8>,
    pub vendor_id: u16,
    /// Why the record was emitted: complete, timeout, evicted, end.
    pub closed_by: ClosedBy,
    /// The sample's source timestamp: the INFO_TS in force at its first
    /// DATA/DATA_FRAG (the writer's clock, ns since the Unix epoch), if any.
    /// ROS 2 traces carry the same value (`rmw_publish.timestamp`,
    /// `rmw_take.source_timestamp`): it joins the wire to them.
    pub source_ts_ns: Option<i64>,
    /// The UDP destination (IP and port) of the record's first datagram: a
    /// reader's unicast locator, or the multicast group all readers share.
    /// Not in the CSV/JSONL columns; per-reader latency keys on it.
    pub dst: Option<std::net::SocketAddr>,
    /// Zenoh: the sending and the receiving session's Zenoh ids (hashed,
    /// [`zid_key`]) of the message that carried the sample, when both
    /// handshakes were captured; `None` for RTPS. Not in the CSV/JSONL
    /// columns; the router hop (a node that received the sample in one
    /// session and sent it in another) keys on it.
    pub zenoh_zids: Option<(u64, u64)>,
}

/// A Zenoh id as a number to compare: FNV-1a (64 bit) of its text, fixed by its definition, so an
/// agent and a `serve` of different builds key the same session the same way (agents stream it).
pub fn zid_key(zid: &str) -> u64 {
    zid.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Why a sample record was emitted (its `closed_by` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClosedBy {
    /// Not emitted yet (never seen in output).
    Open,
    /// Every fragment seen (unfragmented samples: at once).
    Complete,
    /// Incomplete, and no activity for the tracker's timeout.
    Timeout,
    /// Closed early by a cap (too many open samples, or fragment-bitmap memory).
    Evicted,
    /// Still open when the capture ended.
    End,
    /// A supplement record: an unfragmented sample whose record was already
    /// emitted was sent again towards the same destination.
    Retransmission,
    /// A supplement record: an unfragmented sample whose record was already
    /// emitted was sent towards another destination (another unicast reader
    /// or locator). Not a retransmission; its datagram adds wire cost
    /// (`ip_frags`, `bytes`, `submsgs`) to the sample.
    Copy,
    /// Rebuilt by `serve` from an agent's stream (the agent closed it).
    Agent,
}

impl ClosedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            ClosedBy::Open => "open",
            ClosedBy::Complete => "complete",
            ClosedBy::Timeout => "timeout",
            ClosedBy::Evicted => "evicted",
            ClosedBy::End => "end",
            ClosedBy::Retransmission => "retransmission",
            ClosedBy::Copy => "copy",
            ClosedBy::Agent => "agent",
        }
    }
}

impl std::fmt::Display for ClosedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `closed_by` of a repair supplement ([`ClosedBy::Retransmission`]).
pub const CLOSED_RETRANSMISSION: ClosedBy = ClosedBy::Retransmission;
/// `closed_by` of a copy supplement ([`ClosedBy::Copy`]).
pub const CLOSED_COPY: ClosedBy = ClosedBy::Copy;

impl SampleRecord {
    /// A record opened by `e`, the sample's first submessage: identity, times and
    /// frame from it, every counter zero (the caller fills in what it knows).
    fn first_seen(e: &SubmsgEvent, writer: Guid, sn: i64, sample_size: u32) -> Self {
        SampleRecord {
            capture: e.capture.clone(),
            writer_id: writer,
            sn,
            topic: e.topic.clone(),
            node: e.writer_node.clone(),
            traffic_type: e.traffic_type,
            first_ts_ns: e.first_seen_ts_ns(),
            first_ip_ts_ns: e.ip_first_ts_ns,
            last_ts_ns: e.ts_ns,
            complete: false,
            first_frame: e.frame,
            last_frame: e.frame,
            sample_size,
            fragment_size: None,
            frags_expected: 0,
            frags_seen: 0,
            submsgs: 0,
            ip_frags: 0,
            bytes: 0,
            retransmitted_frags: 0,
            retransmitted_bytes: 0,
            destinations: 0,
            nack_frags: 0,
            pcp: e.pcp,
            vendor_id: e.vendor_id,
            closed_by: ClosedBy::Open,
            source_ts_ns: e.source_ts_ns,
            dst: Some(e.dst),
            zenoh_zids: e.zenoh.as_deref().and_then(|z| Some((zid_key(z.zid.as_deref()?), zid_key(z.peer_zid.as_deref()?)))),
        }
    }

    pub fn is_fragmented(&self) -> bool {
        self.fragment_size.is_some()
    }

    /// A supplement, not a sample: add its wire cost (and retransmission),
    /// never count the sample again.
    pub fn is_supplement(&self) -> bool {
        self.closed_by == CLOSED_RETRANSMISSION || self.closed_by == CLOSED_COPY
    }
}

struct DestState {
    dst: SocketAddr,
    /// Fragments seen towards this destination, up to the highest one seen
    /// (inline up to 128 fragments).
    have: SmallVec<[u64; 2]>,
    count: u32,
    /// The latest capture time at which a fragment was first seen towards
    /// this destination: when the sample became complete there, even where
    /// the capture's frames are not in time order (a receiver's frames
    /// stamped on several CPUs are written as each CPU gets to them: a real
    /// lab capture wrote a sample's last datagram before two sent earlier).
    newest_ts: i64,
}

struct SampleState {
    rec: SampleRecord,
    /// Usually one destination: kept inline.
    dests: SmallVec<[DestState; 1]>,
    tracked: bool,
    complete_ts: Option<i64>,
    last_activity: i64,
    last_datagram: (u64, SocketAddr),
}

impl SampleState {
    /// Heap bytes of the fragment bitmaps (the sample's weight in the bitmap budget).
    fn bitmap_bytes(&self) -> usize {
        self.dests.iter().map(|d| if d.have.spilled() { d.have.capacity() * 8 } else { 0 }).sum::<usize>()
            + if self.dests.spilled() { self.dests.capacity() * std::mem::size_of::<DestState>() } else { 0 }
    }
}

/// An unfragmented sample already emitted, remembered for its linger.
struct Recent {
    emitted_ns: i64,
    /// Destinations it was sent to (hashes), at most `max_destinations`.
    dsts: SmallVec<[u64; 2]>,
}

/// Counters of the tracker itself.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SampleStats {
    pub samples: u64,
    pub complete: u64,
    pub incomplete: u64,
    pub evicted: u64,
    /// DATA_FRAG whose fragment fields contradict the sample's first fragment.
    pub inconsistent_fragments: u64,
    pub untracked_large_samples: u64,
    /// Supplement records: unfragmented samples sent again towards the same
    /// destination after their record was emitted.
    pub retransmissions_after_emit: u64,
    /// Supplement records: unfragmented samples sent towards another destination.
    pub copies_after_emit: u64,
    /// Unfragmented samples forgotten before their linger ended because the
    /// repeat window (`max_samples` entries) was full: a later repeat of one
    /// of them counts as a new sample instead of a supplement.
    pub repeat_window_full: u64,
    /// Destinations of a sample beyond `max_destinations`: their copies are
    /// counted as wire cost but not checked for completeness or retransmission.
    pub untracked_destinations: u64,
    /// Of `evicted`: samples closed early because the fragment bitmaps
    /// reached `max_fragment_bytes`.
    pub evicted_for_memory: u64,
    /// Peak bytes held by fragment bitmaps.
    pub peak_fragment_bytes: u64,
}

impl SampleStats {
    /// One line on what the tracker had to give up (bounded state), if anything.
    pub fn problem_line(&self) -> Option<String> {
        let mut parts = vec![];
        if self.evicted > 0 {
            let count = self.evicted - self.evicted_for_memory;
            parts.push(match (count, self.evicted_for_memory) {
                (_, 0) => format!("{} samples closed early: too many samples open at once (closed_by = evicted)", self.evicted),
                (0, m) => format!("{m} samples closed early (closed_by = evicted) for fragment-bitmap memory"),
                (c, m) => format!(
                    "{} samples closed early (closed_by = evicted): {c} because too many were open at once, {m} for fragment-bitmap memory",
                    self.evicted
                ),
            });
        }
        if self.untracked_large_samples > 0 {
            parts.push(format!("{} samples too large to track per fragment (counted, not checked for completeness)", self.untracked_large_samples));
        }
        if self.inconsistent_fragments > 0 {
            parts.push(format!("{} DATA_FRAGs ignored: fragment fields contradict the sample's first fragment", self.inconsistent_fragments));
        }
        if self.repeat_window_full > 0 {
            parts.push(format!("{} unfragmented samples forgotten before their linger ended (repeat window full): a repeat of one would count as a new sample", self.repeat_window_full));
        }
        if self.untracked_destinations > 0 {
            parts.push(format!(
                "{} sample copies to destinations beyond the per-sample cap (counted, not checked for completeness or retransmission)",
                self.untracked_destinations
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// One line: what the tracker gave up, or that it gave up nothing.
    pub fn summary_line(&self) -> String {
        self.problem_line().unwrap_or_else(|| "no sample evicted or untracked".to_string())
    }
}

type Key = (Guid, i64);

/// aHash: the keys differ mostly in consecutive sequence numbers, which
/// FxHash spreads poorly under heavy insert/remove churn.
type Table<V> = BoundedMap<Key, V, ahash::RandomState>;

pub struct SampleTracker {
    cfg: SampleConfig,
    /// Open samples, least recently active first (timeouts and eviction),
    /// weighted by the bytes of their fragment bitmaps.
    open: Table<Box<SampleState>>,
    /// Complete samples by completion time: the end of their linger.
    completed: VecDeque<(i64, Key)>,
    /// Unfragmented samples already emitted, in emission order: destinations
    /// seen, for the linger time.
    recent: Table<Recent>,
    last_sweep_ns: i64,
    now_ns: i64,
    pub stats: SampleStats,
}

const SWEEP_EVERY_NS: i64 = 100_000_000;

fn dst_hash(a: &SocketAddr) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    a.hash(&mut h);
    h.finish()
}

/// Closes a sample: counts it and hands its record out.
fn emit(stats: &mut SampleStats, mut s: Box<SampleState>, why: ClosedBy, out: &mut dyn FnMut(SampleRecord)) {
    s.rec.closed_by = why;
    if s.rec.complete {
        stats.complete += 1;
    } else {
        stats.incomplete += 1;
    }
    out(s.rec);
}

impl SampleTracker {
    pub fn new(cfg: SampleConfig) -> Self {
        SampleTracker {
            cfg,
            open: BoundedMap::with_hasher(cfg.max_samples, Default::default()).with_max_weight(cfg.max_fragment_bytes),
            completed: VecDeque::new(),
            // Sized once for the cap (twice over, so churn only ever rehashes
            // in place): the table never grows, and pages are only resident
            // once used, so a small capture stays small.
            recent: BoundedMap::with_hasher(cfg.max_samples, Default::default()).with_capacity(2 * cfg.max_samples.min(1 << 20)),
            last_sweep_ns: i64::MIN,
            now_ns: i64::MIN,
            stats: SampleStats::default(),
        }
    }

    pub fn open_samples(&self) -> usize {
        self.open.len()
    }

    /// Feeds one event; closed samples are passed to `out`.
    pub fn on_event(&mut self, e: &SubmsgEvent, out: &mut dyn FnMut(SampleRecord)) {
        self.now_ns = self.now_ns.max(e.ts_ns);
        match e.kind {
            SubmsgKind::Data | SubmsgKind::DataFrag => self.on_data(e, out),
            SubmsgKind::NackFrag => {
                if let (Some(w), Some(sn)) = (e.writer_id, e.sn) {
                    if let Some(s) = self.open.get_mut(&(w, sn)) {
                        s.rec.nack_frags = s.rec.nack_frags.saturating_add(1);
                    }
                }
            }
            _ => {}
        }
        if self.now_ns.saturating_sub(self.last_sweep_ns) >= SWEEP_EVERY_NS {
            self.sweep(out);
        }
    }

    /// Moves the tracker's clock without an event (live capture during a
    /// quiet period), so lingering and timed-out samples are still emitted.
    pub fn advance(&mut self, now_ns: i64, out: &mut dyn FnMut(SampleRecord)) {
        self.now_ns = self.now_ns.max(now_ns);
        if self.now_ns.saturating_sub(self.last_sweep_ns) >= SWEEP_EVERY_NS {
            self.sweep(out);
        }
    }

    fn on_data(&mut self, e: &SubmsgEvent, out: &mut dyn FnMut(SampleRecord)) {
        let (Some(writer), Some(sn)) = (e.writer_id, e.sn) else { return };
        let key = (writer, sn);
        let sample_size = e.sample_size.unwrap_or(0);
        let slot = match self.open.slot(&key) {
            Some(slot) => slot,
            None if e.kind == SubmsgKind::Data => {
                self.on_unfragmented(e, writer, sn, sample_size, out);
                return;
            }
            None => {
                let expected = match e.fragment_size {
                    Some(fs) if fs > 0 => (sample_size as u64).div_ceil(fs as u64).max(1),
                    _ => 1,
                };
                let tracked = expected <= self.cfg.max_fragments as u64;
                self.stats.samples += 1;
                if !tracked {
                    self.stats.untracked_large_samples += 1;
                }
                let state = Box::new(SampleState {
                    rec: SampleRecord {
                        fragment_size: e.fragment_size,
                        frags_expected: expected.min(u32::MAX as u64) as u32,
                        ..SampleRecord::first_seen(e, writer, sn, sample_size)
                    },
                    dests: SmallVec::new(),
                    tracked,
                    complete_ts: None,
                    last_activity: e.ts_ns,
                    last_datagram: (0, e.dst),
                });
                let stats = &mut self.stats;
                self.open.insert(key, state, &mut |_, gone| {
                    stats.evicted += 1;
                    emit(stats, gone, ClosedBy::Evicted, out)
                });
                self.open.slot(&key).expect("inserted above")
            }
        };
        let (frag_start, nfrags) = e.fragment_range();
        let s = self.open.at_mut(slot, &key).expect("slot of an open sample");
        let before = s.bitmap_bytes();
        let r = &mut s.rec;
        if r.topic.is_none() {
            r.topic = e.topic.clone();
        }
        if r.node.is_none() {
            r.node = e.writer_node.clone();
        }
        if (r.sample_size != sample_size || (e.kind == SubmsgKind::DataFrag && r.fragment_size != e.fragment_size))
            && !(e.kind == SubmsgKind::Data && r.fragment_size.is_none())
        {
            self.stats.inconsistent_fragments += 1;
            return;
        }
        s.last_activity = e.ts_ns;
        r.first_ts_ns = r.first_ts_ns.min(e.ts_ns);
        r.first_ip_ts_ns = r.first_ip_ts_ns.min(e.ip_first_ts_ns);
        r.first_frame = r.first_frame.min(e.frame);
        r.submsgs = r.submsgs.saturating_add(1);
        r.bytes = r.bytes.saturating_add(e.payload_size.unwrap_or(0) as u64);
        if s.last_datagram != (e.frame, e.dst) {
            s.last_datagram = (e.frame, e.dst);
            r.ip_frags = r.ip_frags.saturating_add(e.ip_frags as u32);
        }
        if s.complete_ts.is_none() {
            r.last_ts_ns = r.last_ts_ns.max(e.ts_ns);
            r.last_frame = r.last_frame.max(e.frame);
        }
        if !s.tracked {
            self.open.touch_at(slot);
            return;
        }
        let di = match s.dests.iter().position(|d| d.dst == e.dst) {
            Some(i) => i,
            None if s.dests.len() >= self.cfg.max_destinations => {
                self.stats.untracked_destinations += 1;
                self.open.touch_at(slot);
                return;
            }
            None => {
                s.dests.push(DestState { dst: e.dst, have: SmallVec::new(), count: 0, newest_ts: i64::MIN });
                r.destinations = s.dests.len().min(u16::MAX as usize) as u16;
                s.dests.len() - 1
            }
        };
        let d = &mut s.dests[di];
        let fsize = r.fragment_size.unwrap_or(0) as u64;
        // Fragment numbers are 1-based; only those the sample can have count
        // (a forged range costs nothing beyond it).
        let first = (frag_start as u64).max(1);
        let last = (frag_start as u64 + nfrags as u64).saturating_sub(1).min(r.frags_expected as u64);
        for num in first..=last {
            let idx = (num - 1) as usize;
            let (w, b) = (idx / 64, idx % 64);
            if w >= d.have.len() {
                // Only as far as the fragments received reach.
                d.have.resize(w + 1, 0);
            }
            if d.have[w] & (1 << b) != 0 {
                r.retransmitted_frags = r.retransmitted_frags.saturating_add(1);
                r.retransmitted_bytes =
                    r.retransmitted_bytes.saturating_add(if fsize > 0 { fsize } else { e.payload_size.unwrap_or(0) as u64 });
            } else {
                d.have[w] |= 1 << b;
                d.count += 1;
                d.newest_ts = d.newest_ts.max(e.ts_ns);
            }
        }
        r.frags_seen = r.frags_seen.max(d.count);
        if s.complete_ts.is_none() && d.count == r.frags_expected {
            s.complete_ts = Some(d.newest_ts);
            r.complete = true;
            r.last_ts_ns = d.newest_ts;
            r.last_frame = e.frame;
            self.completed.push_back((e.ts_ns, key));
        }
        let after = s.bitmap_bytes();
        self.open.touch_at(slot);
        if after != before {
            let evicted_before = self.stats.evicted;
            let stats = &mut self.stats;
            self.open.set_weight_at(slot, after, &mut |_, gone| {
                stats.evicted += 1;
                emit(stats, gone, ClosedBy::Evicted, out)
            });
            self.stats.evicted_for_memory += self.stats.evicted - evicted_before;
            self.stats.peak_fragment_bytes = self.stats.peak_fragment_bytes.max(self.open.weight() as u64);
        }
    }

    fn close(&mut self, key: (Guid, i64), why: ClosedBy, out: &mut dyn FnMut(SampleRecord)) {
        if let Some(s) = self.open.remove(&key) {
            emit(&mut self.stats, s, why, out);
        }
    }

    fn on_unfragmented(&mut self, e: &SubmsgEvent, writer: Guid, sn: i64, size: u32, out: &mut dyn FnMut(SampleRecord)) {
        let key = (writer, sn);
        let dst = dst_hash(&e.dst);
        let payload = e.payload_size.unwrap_or(0) as u64;
        let record = |complete: bool, retx: u32, closed_by: ClosedBy| SampleRecord {
            complete,
            frags_expected: 1,
            frags_seen: u32::from(complete),
            submsgs: 1,
            ip_frags: e.ip_frags as u32,
            bytes: payload,
            retransmitted_frags: retx,
            retransmitted_bytes: retx as u64 * payload,
            destinations: 1,
            closed_by,
            ..SampleRecord::first_seen(e, writer, sn, size)
        };
        if let Some(r) = self.recent.get_mut(&key) {
            if r.dsts.contains(&dst) {
                self.stats.retransmissions_after_emit += 1;
                out(record(false, 1, CLOSED_RETRANSMISSION));
            } else {
                // The same sample towards another reader: not a new sample,
                // but its datagram is wire cost of the sample.
                if r.dsts.len() < self.cfg.max_destinations {
                    r.dsts.push(dst);
                } else {
                    // Not remembered: a repeat to it will count as another copy.
                    self.stats.untracked_destinations += 1;
                }
                self.stats.copies_after_emit += 1;
                out(record(true, 0, CLOSED_COPY));
            }
            return;
        }
        self.stats.samples += 1;
        self.stats.complete += 1;
        // Capacity: the oldest is forgotten (a later repeat of it would count as a new sample).
        let full = &mut self.stats.repeat_window_full;
        self.recent.insert(key, Recent { emitted_ns: e.ts_ns, dsts: smallvec::smallvec![dst] }, &mut |_, _| *full += 1);
        out(record(true, 0, ClosedBy::Complete));
    }

    fn sweep(&mut self, out: &mut dyn FnMut(SampleRecord)) {
        self.last_sweep_ns = self.now_ns;
        let now = self.now_ns;
        let (linger, timeout) = (self.cfg.linger_ns, self.cfg.timeout_ns);
        while self.recent.peek_lru().is_some_and(|(_, r)| now.saturating_sub(r.emitted_ns) > linger) {
            self.recent.pop_lru();
        }
        // Complete samples whose linger is over (unless a late repair moved them on).
        while let Some(&(t, key)) = self.completed.front() {
            if now.saturating_sub(t) <= linger {
                break;
            }
            self.completed.pop_front();
            let Some(s) = self.open.get(&key) else { continue };
            if now.saturating_sub(s.last_activity) > linger {
                self.close(key, ClosedBy::Complete, out);
            } else {
                self.completed.push_back((s.last_activity, key));
            }
        }
        // Incomplete samples that went quiet: the least recently active come first.
        let mut budget = self.open.len();
        while let Some((&key, s)) = self.open.peek_lru() {
            if budget == 0 || now.saturating_sub(s.last_activity) <= timeout {
                break;
            }
            budget -= 1;
            if s.complete_ts.is_some() {
                // The completed queue closes it; keep it evictable meanwhile.
                self.open.touch(&key);
            } else {
                self.close(key, ClosedBy::Timeout, out);
            }
        }
    }

    /// End of input: every open sample is emitted, in first-seen order.
    pub fn finish(&mut self, out: &mut dyn FnMut(SampleRecord)) {
        let mut open = self.open.drain_lru();
        open.sort_by_key(|(k, s)| (s.rec.first_ts_ns, *k));
        self.completed.clear();
        self.recent.clear();
        for (_, s) in open {
            let why = if s.rec.complete { ClosedBy::Complete } else { ClosedBy::End };
            emit(&mut self.stats, s, why, out);
        }
    }
}

crate::record!(SampleRecord, r, {
    capture: Str => Value::S(&r.capture),
    writer_id: Str => Value::Guid(r.writer_id),
    sn: I64 => Value::I(r.sn),
    topic_name: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.topic_name)),
    type_name: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.type_name)),
    topic_raw: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.topic_raw)),
    traffic_type: Str => Value::S(r.traffic_type.as_str()),
    first_ts_ns: I64 => Value::I(r.first_ts_ns),
    first_ip_ts_ns: I64 => Value::I(r.first_ip_ts_ns),
    last_ts_ns: I64 => Value::I(r.last_ts_ns),
    complete: Bool => Value::B(r.complete),
    first_frame: U64 => Value::U(r.first_frame),
    last_frame: U64 => Value::U(r.last_frame),
    sample_size: U64 => Value::U(r.sample_size as u64),
    fragment_size: U64 => r.fragment_size.map_or(Value::Null, |f| Value::U(f as u64)),
    frags_expected: U64 => Value::U(r.frags_expected as u64),
    frags_seen: U64 => Value::U(r.frags_seen as u64),
    submsgs: U64 => Value::U(r.submsgs as u64),
    ip_frags: U64 => Value::U(r.ip_frags as u64),
    bytes: U64 => Value::U(r.bytes),
    retransmitted_frags: U64 => Value::U(r.retransmitted_frags as u64),
    retransmitted_bytes: U64 => Value::U(r.retransmitted_bytes),
    destinations: U64 => Value::U(r.destinations as u64),
    nack_frags: U64 => Value::U(r.nack_frags as u64),
    pcp: U64 => r.pcp.map_or(Value::Null, |p| Value::U(p as u64)),
    vendor_id: Str => Value::Vendor(r.vendor_id),
    closed_by: Str => Value::S(r.closed_by.as_str()),
    writer_node: Str => r.node.as_deref().map_or(Value::Null, |n| Value::S(&n.fq_name)),
    domain: U64 => r.topic.as_ref().and_then(|t| t.domain).map_or(Value::Null, |d| Value::U(d as u64)),
});

#[cfg(test)]
mod tests {
    use super::*;

    /// Oracle: the FNV-1a 64-bit test vectors of its authors (Fowler/Noll/Vo, isthe.com/chongo/tech/comp/fnv).
    #[test]
    fn zid_key_is_fnv1a_64() {
        assert_eq!(zid_key(""), 0xcbf29ce484222325);
        assert_eq!(zid_key("a"), 0xaf63dc4c8601ec8c);
        assert_eq!(zid_key("foobar"), 0x85944171f73967e8);
    }
    use std::net::{IpAddr, Ipv4Addr};

    fn frag(sn: i64, start: u32, n: u16, ts: i64, dst_port: u16) -> SubmsgEvent {
        let mut e = SubmsgEvent::blank(Arc::from("cap"));
        e.kind = SubmsgKind::DataFrag;
        e.writer_id = Some(Guid::parse_hex("0110000000000000000000010000_0102".replace('_', "").as_str()).unwrap());
        e.sn = Some(sn);
        e.fragment_starting_num = Some(start);
        e.frags_in_submsg = Some(n);
        e.fragment_size = Some(100);
        e.sample_size = Some(950);
        e.payload_size = Some(100 * n as u32);
        e.ts_ns = ts;
        e.ip_first_ts_ns = ts - 5;
        e.frame = ts as u64;
        e.dst = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), dst_port);
        e
    }

    #[test]
    fn completion_retransmission_and_linger() {
        let mut t = SampleTracker::new(SampleConfig { linger_ns: 1000, timeout_ns: 10_000, ..Default::default() });
        let mut out = vec![];
        let mut push = |t: &mut SampleTracker, e: SubmsgEvent| t.on_event(&e, &mut |r| out.push(r));
        push(&mut t, frag(1, 1, 5, 100, 7411));
        push(&mut t, frag(1, 3, 2, 200, 7411)); // retransmission of 3,4
        push(&mut t, frag(1, 6, 5, 300, 7411)); // completes (10 fragments, last partial)
        push(&mut t, frag(1, 6, 1, 400, 7411)); // late repair, still counted
        t.finish(&mut |r| out.push(r));
        assert_eq!(out.len(), 1);
        let r = &out[0];
        assert!(r.complete);
        assert_eq!((r.frags_expected, r.frags_seen), (10, 10));
        assert_eq!((r.first_ts_ns, r.last_ts_ns, r.first_ip_ts_ns), (100, 300, 95));
        assert_eq!(r.retransmitted_frags, 3);
        assert_eq!(r.retransmitted_bytes, 300);
    }

    /// The shape of a real lab capture (the CI run of stop 48, pc2): the
    /// sample's last datagram written before two sent earlier, stamped later
    /// than both. Complete when every fragment had been seen: tshark's
    /// reading, the latest first sighting, not the time of the frame that
    /// happened to come last in the file.
    #[test]
    fn completion_time_is_the_latest_first_sighting_in_a_file_out_of_time_order() {
        let mut t = SampleTracker::new(SampleConfig { linger_ns: 1000, timeout_ns: 10_000, ..Default::default() });
        let mut out = vec![];
        let mut push = |t: &mut SampleTracker, e: SubmsgEvent| t.on_event(&e, &mut |r| out.push(r));
        push(&mut t, frag(1, 1, 4, 100, 7411));
        push(&mut t, frag(1, 9, 2, 497, 7411)); // the last datagram, stamped last, written early
        push(&mut t, frag(1, 1, 1, 600, 7411)); // a repeat before completion does not count
        push(&mut t, frag(1, 5, 2, 462, 7411));
        push(&mut t, frag(1, 7, 2, 469, 7411)); // completes the sample in file order
        t.finish(&mut |r| out.push(r));
        let r = &out[0];
        assert!(r.complete);
        assert_eq!((r.first_ts_ns, r.last_ts_ns), (100, 497));
    }

    fn data(sn: i64, ts: i64, dst_port: u16) -> SubmsgEvent {
        let mut e = frag(sn, 1, 1, ts, dst_port);
        e.kind = SubmsgKind::Data;
        e.fragment_starting_num = None;
        e.frags_in_submsg = None;
        e.fragment_size = None;
        e.sample_size = Some(40);
        e.payload_size = Some(40);
        e
    }

    #[test]
    fn repeat_window_is_bounded_and_reported() {
        let mut t = SampleTracker::new(SampleConfig { max_samples: 2, ..Default::default() });
        let mut out = vec![];
        for sn in 1..=3 {
            t.on_event(&data(sn, 100 + sn, 7411), &mut |r| out.push(r));
        }
        assert_eq!(t.stats.repeat_window_full, 1);
        assert!(t.recent.len() <= 2);
        // sn 1 was forgotten: its repeat is a new sample, not a supplement.
        t.on_event(&data(1, 200, 7411), &mut |r| out.push(r));
        assert!(!out.last().unwrap().is_supplement());
        assert!(t.stats.problem_line().unwrap().contains("repeat window full"));
    }

    #[test]
    fn unfragmented_samples_are_emitted_at_once_and_repairs_corrected() {
        let mut t = SampleTracker::new(SampleConfig { linger_ns: 1000, ..Default::default() });
        let mut out = vec![];
        t.on_event(&data(1, 100, 7411), &mut |r| out.push(r));
        assert_eq!(out.len(), 1, "emitted when first seen");
        assert!(out[0].complete && out[0].frags_seen == 1 && !out[0].is_supplement());
        t.on_event(&data(1, 150, 7413), &mut |r| out.push(r)); // another reader: a copy, not a sample
        assert_eq!(out.len(), 2);
        assert!(out[1].is_supplement());
        assert_eq!((out[1].closed_by, out[1].retransmitted_frags, out[1].ip_frags, out[1].bytes), (CLOSED_COPY, 0, 1, 40));
        t.on_event(&data(1, 200, 7411), &mut |r| out.push(r)); // sent again to the first reader
        assert_eq!(out.len(), 3);
        assert!(out[2].is_supplement());
        assert_eq!(out[2].closed_by, CLOSED_RETRANSMISSION);
        assert_eq!((out[2].retransmitted_frags, out[2].retransmitted_bytes), (1, 40));
        // After the linger the sample is forgotten.
        t.advance(10_000_000_000, &mut |r| out.push(r));
        t.on_event(&data(2, 10_000_000_001, 7411), &mut |r| out.push(r));
        assert_eq!(t.stats.samples, 2);
        assert_eq!((t.stats.retransmissions_after_emit, t.stats.copies_after_emit), (1, 1));
    }

    #[test]
    fn two_destinations_are_not_retransmissions() {
        let mut t = SampleTracker::new(SampleConfig::default());
        let mut out = vec![];
        for port in [7411, 7413] {
            t.on_event(&frag(2, 1, 10, 100, port), &mut |r| out.push(r));
        }
        t.finish(&mut |r| out.push(r));
        assert_eq!(out[0].retransmitted_frags, 0);
        assert_eq!(out[0].destinations, 2);
        assert!(out[0].complete);
    }

    #[test]
    fn incomplete_times_out_and_capacity_evicts() {
        let mut t = SampleTracker::new(SampleConfig { linger_ns: 10, timeout_ns: 1000, max_samples: 2, ..Default::default() });
        let mut out = vec![];
        t.on_event(&frag(1, 1, 3, 0, 1), &mut |r| out.push(r));
        t.on_event(&frag(2, 1, 3, 10, 1), &mut |r| out.push(r));
        t.on_event(&frag(3, 1, 3, 20, 1), &mut |r| out.push(r));
        assert_eq!(t.stats.evicted, 1);
        t.on_event(&frag(4, 1, 3, 200_000_000, 1), &mut |r| out.push(r));
        assert!(out.iter().any(|r| r.closed_by == ClosedBy::Timeout && !r.complete));
        assert!(t.open_samples() <= 2);
    }
}
