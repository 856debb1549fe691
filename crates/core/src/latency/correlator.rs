//! The [`Correlator`]: samples and DATA_FRAG sightings of every capture point
//! (and the ROS 2 events of traces) judged once every capture has moved the
//! window past them; rows go to a [`RowSink`] as they are judged.

use super::app::AppTruth;
use super::clock::{ClockLimits, ClockSummary, ClockTracker};
use super::item::Item;
use super::layers::{Layer, Level, Status, Timing};
use super::readers;
use super::rows::{FlowSummary, LatencyRow, RosColumns, WriterRole};
use super::stats::{Dist, JitterTrack};
use crate::bounded::BoundedMap;
use crate::discovery::TopicNames;
use crate::names::NameCap;
use crate::events::TrafficType;
use crate::sink::RowSink;
use crate::ros2::chain::{ChainConfig, ChainRow, ChainTracker, Hop, HopLayers};
use crate::ros2::callbacks::CallbackTable;
use crate::ros2::join::{Delivery, Join, JoinConfig, Publish, Take, TraceJoin};
use crate::ros2::TraceItem;
use ddscope_wire::{Guid, GuidPrefix};
use serde::Serialize;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct CorrelatorConfig {
    /// Capture-point names, indexed by the capture numbers items come with.
    pub captures: Vec<String>,
    /// t_o per capture (Bosk et al. Eq. 9): subtracted from its timestamps.
    pub offsets_ns: Vec<i64>,
    /// Per capture: the offset the clock tracker pairs its keys by (`offsets_ns` where one is applied,
    /// else the first 2 s's coarse offset, so clocks seconds apart are tracked); beyond the vector's
    /// end, `offsets_ns`. Never applied to a time.
    pub pairing_offsets_ns: Vec<i64>,
    /// How long after a sample was first seen it is judged (and called lost).
    pub window_ns: i64,
    /// Publication period for in time / late; `None` infers it per writer.
    pub period_ns: Option<i64>,
    pub message_rows: bool,
    pub submessage_rows: bool,
    /// Samples waiting for judgement (the window's contents). Beyond it the
    /// oldest is judged early, with what has been seen so far
    /// ([`CorrelationStats::samples_judged_early`]). ~250 bytes each.
    pub max_pending_samples: usize,
    /// DATA_FRAG submessages waiting for judgement; beyond it the oldest is
    /// judged early ([`CorrelationStats::submessages_judged_early`]). ~150 bytes each.
    pub max_pending_submessages: usize,
    /// Writers remembered (sender capture, period, jitter state); the least
    /// recently seen is forgotten first ([`CorrelationStats::writers_evicted`]).
    /// ~300 bytes each plus their intervals.
    pub max_writers: usize,
    /// Flows (topic × sender → receiver) with statistics; the least recently
    /// updated is dropped first, with its statistics ([`CorrelationStats::flows_evicted`]).
    pub max_flows: usize,
    /// Bytes all flows' latency distributions may hold together; over it the
    /// least recently updated flows are dropped.
    pub max_flow_bytes: usize,
    /// The ROS 2 layer, used once a trace is added ([`Correlator::add_trace`]).
    pub ros: RosOptions,
    /// What is known of each capture's clock against the first's ([`ClockTrust`]); a capture
    /// beyond the vector's end is [`ClockTrust::Unchecked`].
    pub clocks: Vec<ClockTrust>,
    /// The capture point each participant (GUID prefix) was found to send from by the traffic's
    /// two directions (the offset estimate's split, clock-independent); a writer of a participant
    /// not listed gets the capture that saw its samples first (time order), counted per flow.
    pub participant_capture: Vec<(GuidPrefix, usize)>,
    /// Track every capture's clock against the first's over the run from the exchanges seen at
    /// both ([`ClockTracker`]): offset, drift and steps, applied where samples are judged to the
    /// captures whose clock is not [`ClockTrust::Given`] (and placing participants as it goes).
    pub track_clocks: bool,
}

/// What is known of a capture point's clock relative to the first capture's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockTrust {
    /// The reference clock (the first capture), or a capture on the same host.
    Reference,
    /// The offset was estimated from traffic seen both ways: the true offset lies within ± this many ns.
    Estimated(i64),
    /// The user gave the offset and the traffic could not check it.
    Given,
    /// Nothing was checked (one-way traffic only, `--no-estimate`, or a live capture).
    #[default]
    Unchecked,
}

/// Caps and choices of the ROS 2 layer (traces joined to the wire).
#[derive(Debug, Clone, Default)]
pub struct RosOptions {
    /// Caps of the publishes and takes waiting for the join (the window comes from the correlator).
    pub join: JoinConfig,
    /// The chain to measure, caps, and whether to emit chain rows.
    pub chain: ChainConfig,
}

/// One trace input: its host (capture index) and progress.
struct TraceSlot {
    host: usize,
    watermark: i64,
    ended: bool,
}

/// State of the ROS 2 layer; exists once a trace was added.
struct RosState {
    join: TraceJoin,
    chains: ChainTracker,
    traces: Vec<TraceSlot>,
    /// Per capture: whether its host has a trace.
    traced: Vec<bool>,
    /// Callback durations and publishes per callback (every layout).
    callbacks: CallbackTable,
    /// Topic names for trace-to-trace rows, by ROS topic.
    topics: BoundedMap<Arc<str>, Arc<TopicNames>>,
}

impl RosState {
    fn topic(&mut self, t: &Arc<str>) -> Arc<TopicNames> {
        self.topics
            .get_or_insert_with(
                t.clone(),
                || {
                    Arc::new(TopicNames::from_parts(format!("rt{t}"), String::new(), t.to_string(), String::new(), None, &mut NameCap::default()))
                },
                &mut |_, _| {},
            )
            .clone()
    }
}

impl Default for CorrelatorConfig {
    /// No captures yet (see [`Correlator::add_capture`]), a 5 s window, the
    /// period inferred, message and submessage rows, and caps that keep the
    /// correlator under ~200 MB whatever the traffic.
    fn default() -> Self {
        CorrelatorConfig {
            captures: vec![],
            offsets_ns: vec![],
            pairing_offsets_ns: vec![],
            window_ns: crate::window::Window::DEFAULT.ns(),
            period_ns: None,
            message_rows: true,
            submessage_rows: true,
            max_pending_samples: 1 << 18,
            max_pending_submessages: 1 << 18,
            max_writers: 1 << 16,
            max_flows: 1 << 14,
            max_flow_bytes: 64 << 20,
            ros: RosOptions::default(),
            clocks: vec![],
            participant_capture: vec![],
            track_clocks: false,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sighting {
    first_ts: i64,
    first_ip_ts: i64,
    last_ts: i64,
    complete: bool,
    retransmitted_frags: u32,
    retransmitted_bytes: u64,
    frags_expected: u32,
    sample_size: u32,
    /// Zenoh: the sending and receiving sessions' ids (hashed) of this sighting (the router hop).
    zids: Option<(u64, u64)>,
}

struct PendingSample {
    /// First sighting (corrected), the order in which samples are judged.
    first: i64,
    /// The source timestamp (INFO_TS) of the first sighting that had one.
    source_ts: Option<i64>,
    topic: Option<Arc<TopicNames>>,
    /// Usually a sender and one receiver: kept inline.
    seen: SmallVec<[(usize, Sighting); 2]>,
    /// (capture, UDP destination, arrival (corrected)) of every copy of an
    /// unfragmented sample, for the per-reader table ([`readers`]).
    copies: SmallVec<[(usize, std::net::SocketAddr, i64); 2]>,
}

struct PendingFrag {
    first_ip: i64,
    topic: Option<Arc<TopicNames>>,
    /// (capture, first IP fragment, last IP fragment, duplicates)
    seen: SmallVec<[(usize, i64, i64, u32); 2]>,
}

#[derive(Default)]
struct WriterState {
    topic: Option<Arc<TopicNames>>,
    /// The writer's ROS node (`/ns/name`) from the captures' ROS graph (`ros_discovery_info`).
    node: Option<Arc<str>>,
    /// Captures that have seen this writer's samples.
    captures: u64,
    /// Votes: how often each capture saw a sample first (capture, votes).
    first_votes: SmallVec<[(usize, u64); 2]>,
    last_sender_first: Option<(i64, i64)>,
    /// The sender capture from the wire (the participant's side of the two-way traffic), once known.
    placed: Option<usize>,
    intervals: Dist,
    /// Per receiver capture: the previous sample, for jitter.
    jitter: SmallVec<[(usize, JitterTrack); 1]>,
}

impl WriterState {
    fn sender(&self) -> Option<usize> {
        if self.placed.is_some() {
            return self.placed;
        }
        self.first_votes.iter().max_by_key(|(c, v)| (*v, std::cmp::Reverse(*c))).map(|(c, _)| *c)
    }
    fn vote(&mut self, c: usize) {
        match self.first_votes.iter_mut().find(|(x, _)| *x == c) {
            Some((_, v)) => *v += 1,
            None => self.first_votes.push((c, 1)),
        }
    }
    fn jitter(&mut self, r: usize) -> &mut JitterTrack {
        let i = match self.jitter.iter().position(|(x, _)| *x == r) {
            Some(i) => i,
            None => {
                self.jitter.push((r, JitterTrack::default()));
                self.jitter.len() - 1
            }
        };
        &mut self.jitter[i].1
    }
    fn period(&self, given: Option<i64>) -> Option<i64> {
        given.or_else(|| if self.intervals.count() >= 3 { self.intervals.percentile(50.0).map(|p| p as i64) } else { None })
    }
}

/// Largest sequence-number gap between two of a writer's samples at its sender that still gives a
/// publication interval (divided by the gap).
const MAX_PERIOD_GAP: i64 = 64;

/// Accumulated statistics of one flow: a topic from one sender capture to one receiver capture.
#[derive(Default, Clone)]
pub struct FlowStats {
    /// The topic's names, when discovery named it.
    pub names: Option<Arc<TopicNames>>,
    pub samples: u64,
    pub delivered: u64,
    pub lost: u64,
    pub incomplete: u64,
    pub retransmitted_samples: u64,
    pub retransmitted_frags: u64,
    pub retransmitted_bytes: u64,
    pub period_ns: Option<i64>,
    pub layers: BTreeMap<Layer, Dist>,
    pub jitter_signed: Dist,
    pub jitter_abs: Dist,
    pub repaired: Dist,
    pub clean: Dist,
    /// The first lost sequence numbers (for a closer look with `dissect`).
    pub lost_examples: Vec<i64>,
    /// ROS nodes that sent / received the flow's samples (traces or the wire's ROS graph), at most [`MAX_FLOW_NODES`] each.
    pub sender_nodes: SmallVec<[Arc<str>; 1]>,
    pub receiver_nodes: SmallVec<[Arc<str>; 1]>,
    /// Node names not kept beyond [`MAX_FLOW_NODES`].
    pub nodes_dropped: u64,
    /// Samples whose sender capture came from time order (the writer's participant was not
    /// placed by the two-way traffic), not from the wire.
    pub sender_by_time_order: u64,
}

/// Node names kept per flow and side.
pub const MAX_FLOW_NODES: usize = 8;

impl FlowStats {
    fn layer(&mut self, l: Layer, v: i64) {
        self.layers.entry(l).or_default().record(v);
    }

    fn note_nodes(&mut self, sender: Option<&Arc<str>>, receiver: Option<&Arc<str>>) {
        for (n, v) in [(sender, &mut self.sender_nodes), (receiver, &mut self.receiver_nodes)] {
            let Some(n) = n else { continue };
            if v.iter().any(|x| x == n) {
                continue;
            }
            if v.len() < MAX_FLOW_NODES {
                v.push(n.clone());
            } else {
                self.nodes_dropped += 1;
            }
        }
    }

    /// Heap bytes held by the flow's distributions (its weight in the flow budget).
    pub fn heap_bytes(&self) -> usize {
        let dists = self.layers.values().chain([&self.jitter_signed, &self.jitter_abs, &self.repaired, &self.clean]);
        dists.map(|d| d.heap_bytes() + std::mem::size_of::<Dist>()).sum::<usize>() + self.lost_examples.capacity() * 8
    }
}

/// Adds the ROS 2 layers of a row to its flow.
fn record_ros_layers(flow: &mut FlowStats, c: &RosColumns) {
    flow.note_nodes(c.sender_node.as_ref(), c.receiver_node.as_ref());
    for (l, v) in [
        (Layer::RosPublish, c.ros_publish_ns),
        (Layer::DdsSend, c.dds_send_ns),
        (Layer::DdsLocal, c.dds_local_ns),
        (Layer::DdsRemote, c.dds_remote_ns),
        (Layer::DdsReceive, c.dds_receive_ns),
        (Layer::Executor, c.executor_ns),
        (Layer::Callback, c.callback_ns),
        (Layer::RosE2e, c.ros_e2e_ns),
    ] {
        if let Some(v) = v {
            flow.layer(l, v);
        }
    }
}

/// Flows are keyed by topic (or "writer GUID" when unnamed), its DDS domain
/// (topics of different domains are different flows), sender and receiver capture.
pub type FlowKey = (String, Option<u32>, usize, usize);

/// Counters about the correlation itself.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CorrelationStats {
    pub samples_judged: u64,
    /// Samples seen at one capture point only (nothing to correlate).
    pub single_capture_samples: u64,
    /// Samples whose first sighting was not at the writer's usual sender capture.
    pub sender_disagreements: u64,
    pub negative_latencies: u64,
    pub submessages_judged: u64,
    pub max_pending_samples: usize,
    pub max_pending_submessages: usize,
    /// Repairs reported after their sample was judged (not reflected in `repaired`).
    pub late_repairs: u64,
    /// Samples judged before their window ended because more than
    /// `max_pending_samples` were waiting (a receiver's sighting after that
    /// is not matched).
    pub samples_judged_early: u64,
    /// DATA_FRAGs judged early because more than `max_pending_submessages` were waiting.
    pub submessages_judged_early: u64,
    /// DATA_FRAGs due before their writer's sender capture was known (no
    /// sample of that writer judged yet, e.g. the fragments of its first
    /// sample): held, and judged as soon as one of its samples is.
    pub submessages_held: u64,
    /// Held DATA_FRAGs given up: more than `max_pending_submessages` held at
    /// once (the newest is refused), or their writer's sender never became
    /// known before the end.
    pub submessages_held_dropped: u64,
    /// DATA_FRAGs not judged because the writer's sender capture did not see
    /// them (no sending time to measure from).
    pub submessages_without_sender: u64,
    /// Samples not judged because the writer's sender capture did not see
    /// them (no sending time to measure from: no message rows, no router hop).
    pub samples_without_sender: u64,
    /// Zenoh: a capture's further sightings of a sample in another session (the sample came back out on
    /// the link it came in on: a host-local topic through a router). One sighting per capture is kept
    /// (the others count as copies towards their readers); those hops are not measured (docs/zenoh.md).
    pub zenoh_sightings_not_kept: u64,
    /// Writers forgotten (least recently seen first) to stay within `max_writers`.
    pub writers_evicted: u64,
    /// Flows dropped with their statistics (least recently updated first) to
    /// stay within `max_flows` / `max_flow_bytes`.
    pub flows_evicted: u64,
    /// Samples that were counted in the dropped flows.
    pub flow_samples_evicted: u64,
    /// Capture points whose slot went to another (a live agent evicted to make room for a new one).
    pub captures_replaced: u64,
    /// Flows dropped with their statistics because their sender or receiver capture was replaced.
    pub flows_replaced: u64,
    /// Flows (and bytes of their statistics) held at the end.
    pub flows: usize,
    pub flow_bytes: usize,
}

impl CorrelationStats {
    /// What the correlator had to give up to stay within its caps, if anything.
    pub fn problem_line(&self) -> Option<String> {
        let mut parts = vec![];
        if self.samples_judged_early > 0 {
            parts.push(format!(
                "{} samples judged before their window ended (too many samples pending at once; a later sighting is not matched)",
                self.samples_judged_early
            ));
        }
        if self.submessages_judged_early > 0 {
            parts.push(format!("{} DATA_FRAG submessages judged before their window ended (too many pending)", self.submessages_judged_early));
        }
        if self.submessages_held_dropped > 0 {
            parts.push(format!(
                "{} DATA_FRAG submessages dropped unjudged (their writer's sender capture never became known, or too many held)",
                self.submessages_held_dropped
            ));
        }
        if self.writers_evicted > 0 {
            parts.push(format!("{} writers forgotten (too many writers; least recently seen first)", self.writers_evicted));
        }
        if self.flows_evicted > 0 {
            parts.push(format!(
                "{} flows evicted with the statistics of {} samples (too many flows or too much statistics memory; least recently updated first)",
                self.flows_evicted, self.flow_samples_evicted
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// One line for closing summaries: evictions, or that there were none.
    pub fn summary_line(&self) -> String {
        self.problem_line().map_or_else(|| "nothing evicted".to_string(), |l| format!("evicted: {l}"))
    }
}

pub struct Correlator {
    cfg: CorrelatorConfig,
    names: Vec<Arc<str>>,
    app: Arc<AppTruth>,
    /// In first-sighting order (entries are never touched): the front is judged first.
    pending: BoundedMap<(Guid, i64), PendingSample>,
    frags: BoundedMap<(Guid, i64, u32), PendingFrag>,
    /// DATA_FRAGs due before their writer's sender was known, by writer, in
    /// the order they fell due; at most `max_pending_submessages` in all.
    held_frags: rustc_hash::FxHashMap<Guid, Vec<((Guid, i64, u32), PendingFrag)>>,
    held_count: usize,
    watermarks: Vec<i64>,
    /// First and last time each capture has seen (corrected).
    spans: Vec<(i64, i64)>,
    ended: Vec<bool>,
    /// How far judgement by time has gone: the highest horizon (low watermark less the window) used,
    /// at most the latest time any capture has seen. The low watermark can move back (a capture that
    /// had ended or fallen silent runs again, or a new one is added); what was judged stays judged.
    judged_to: i64,
    writers: BoundedMap<Guid, WriterState>,
    /// [`CorrelatorConfig::participant_capture`], bounded by the estimate that made it.
    sides: rustc_hash::FxHashMap<ddscope_wire::GuidPrefix, usize>,
    /// Weighted by the bytes of their distributions.
    flows: BoundedMap<FlowKey, FlowStats>,
    pub stats: CorrelationStats,
    negative_examples: Vec<(usize, usize, i64)>,
    /// The ROS 2 layer (None until a trace is added: no cost without traces).
    ros: Option<Box<RosState>>,
    /// Per-reader latency (reader fairness).
    pub readers: readers::ReaderTable,
    /// The clocks over the run ([`CorrelatorConfig::track_clocks`]).
    clock: Option<Box<ClockTracker>>,
    /// Fits made when placements were last taken from the tracker.
    clock_fits_placed: u64,
    /// Per capture: instants the tracker's line moved, and instants it left (within its error bar).
    clock_instants: Vec<(u64, u64)>,
}

/// Remembers the first arrival of a sample's copy at (capture, destination), within the cap.
fn note_copy(copies: &mut SmallVec<[(usize, std::net::SocketAddr, i64); 2]>, t: &mut readers::ReaderTable, c: usize, dst: std::net::SocketAddr, at: i64) {
    if let Some(x) = copies.iter_mut().find(|(cc, d, _)| *cc == c && *d == dst) {
        x.2 = x.2.min(at);
    } else if copies.len() < readers::MAX_COPIES_PER_SAMPLE {
        copies.push((c, dst, at));
    } else {
        t.copies_dropped += 1;
    }
}

fn topic_key(t: &Option<Arc<TopicNames>>, w: &Guid) -> String {
    t.as_ref().map(|t| t.topic_name.clone()).unwrap_or_else(|| format!("writer {w}"))
}

fn topic_domain(t: &Option<Arc<TopicNames>>) -> Option<u32> {
    t.as_ref().and_then(|t| t.domain)
}

impl Correlator {
    pub fn new(cfg: CorrelatorConfig, app: Arc<AppTruth>) -> Self {
        let n = cfg.captures.len();
        assert!(n <= 64, "at most 64 capture points");
        let names = cfg.captures.iter().map(|c| Arc::from(c.as_str())).collect();
        Correlator {
            names,
            app,
            pending: BoundedMap::new(cfg.max_pending_samples),
            frags: BoundedMap::new(cfg.max_pending_submessages),
            held_frags: Default::default(),
            held_count: 0,
            watermarks: vec![i64::MIN; n],
            spans: vec![(i64::MAX, i64::MIN); n],
            ended: vec![false; n],
            judged_to: i64::MIN,
            writers: BoundedMap::new(cfg.max_writers),
            sides: cfg.participant_capture.iter().copied().filter(|(_, c)| *c < n).collect(),
            flows: BoundedMap::new(cfg.max_flows).with_max_weight(cfg.max_flow_bytes),
            stats: CorrelationStats::default(),
            negative_examples: vec![],
            ros: None,
            readers: readers::ReaderTable::default(),
            clock: cfg.track_clocks.then(|| Box::new(ClockTracker::new(n, ClockLimits::default()))),
            clock_fits_placed: 0,
            clock_instants: vec![],
            cfg,
        }
    }

    /// Adds a trace of capture point `host` (its index); returns the trace's
    /// index for [`push_trace`](Self::push_trace). The host's clock offset applies to the trace.
    pub fn add_trace(&mut self, host: usize) -> usize {
        let window = self.cfg.window_ns;
        let n = self.names.len();
        let ros = self.ros.get_or_insert_with(|| {
            Box::new(RosState {
                join: TraceJoin::new(JoinConfig { window_ns: window, ..self.cfg.ros.join }),
                chains: ChainTracker::new(ChainConfig { window_ns: window, ..self.cfg.ros.chain.clone() }),
                traces: vec![],
                traced: vec![false; n],
                callbacks: CallbackTable::new(4096),
                topics: BoundedMap::new(4096),
            })
        });
        if ros.traced.len() <= host {
            ros.traced.resize(host + 1, false);
        }
        ros.traced[host] = true;
        ros.traces.push(TraceSlot { host, watermark: i64::MIN, ended: false });
        ros.traces.len() - 1
    }

    /// Feeds one item from trace `t`; finished rows go to `out`.
    pub fn push_trace(&mut self, t: usize, item: TraceItem, out: &mut dyn RowSink<LatencyRow>) {
        let Some(ros) = self.ros.as_mut() else { return };
        let Some(host) = ros.traces.get(t).map(|s| s.host) else { return };
        let off = self.cfg.offsets_ns.get(host).copied().unwrap_or(0);
        let corr = |v: i64| v.saturating_sub(off);
        match item {
            TraceItem::Publish(mut rec) => {
                rec.rclcpp_ts = rec.rclcpp_ts.map(corr);
                rec.rcl_ts = rec.rcl_ts.map(corr);
                rec.rmw_ts = rec.rmw_ts.map(corr);
                rec.callback_start = rec.callback_start.map(corr);
                ros.callbacks.add_publish(host, &rec);
                let mut early = vec![];
                ros.join.add_publish(Publish { trace: t as u32, host, rec, wire: None, join: None }, &mut |p, d| early.push((p, d)));
                for (p, d) in early {
                    self.judge_publish(p, d, out);
                }
            }
            TraceItem::Take(mut rec) => {
                rec.rmw_take_ts = corr(rec.rmw_take_ts);
                rec.callback_start_ts = rec.callback_start_ts.map(corr);
                rec.callback_end_ts = rec.callback_end_ts.map(corr);
                ros.join.add_take(Take { trace: t as u32, host, rec, used: false });
            }
            TraceItem::Callback(mut c) => {
                c.start = corr(c.start);
                c.end = c.end.map(corr);
                ros.callbacks.add_callback(host, &c);
            }
            TraceItem::Watermark(w) => {
                let s = &mut ros.traces[t];
                s.watermark = s.watermark.max(corr(w));
                self.judge_due(out);
            }
            TraceItem::End => {
                ros.traces[t].ended = true;
                self.judge_due(out);
            }
        }
    }

    /// Marks trace `t` ended (a silent agent) or running again, like [`set_ended`](Self::set_ended) for a capture.
    pub fn set_trace_ended(&mut self, t: usize, ended: bool, out: &mut dyn RowSink<LatencyRow>) {
        let Some(s) = self.ros.as_mut().and_then(|r| r.traces.get_mut(t)) else { return };
        s.ended = ended;
        self.judge_due(out);
    }

    /// Statistics of the trace join, when traces were added (the window-offset
    /// summary as of the last [`finish`](Self::finish) or [`refresh_join_stats`](Self::refresh_join_stats)).
    pub fn join_stats(&self) -> Option<&crate::ros2::JoinStats> {
        self.ros.as_ref().map(|r| &r.join.stats)
    }

    /// Brings the join's summary statistics up to date.
    pub fn refresh_join_stats(&mut self) {
        if let Some(r) = self.ros.as_mut() {
            r.join.stats();
        }
    }

    /// The chain tracker, when traces were added.
    pub fn chains(&self) -> Option<&ChainTracker> {
        self.ros.as_ref().map(|r| &r.chains)
    }

    /// Callback durations and publishes per callback, when traces were added.
    pub fn callbacks(&self) -> Option<&CallbackTable> {
        self.ros.as_ref().map(|r| &r.callbacks)
    }

    /// Rows of chain instances evaluated since the last call.
    pub fn take_chain_rows(&mut self) -> Vec<ChainRow> {
        self.ros.as_mut().map(|r| r.chains.take_rows()).unwrap_or_default()
    }

    /// A publish left the window: the takes it delivered that no wire sample
    /// claimed (on its own host or, without a capture, on another) become rows.
    fn judge_publish(&mut self, p: Publish, takes: SmallVec<[(Take, Join); 2]>, out: &mut dyn RowSink<LatencyRow>) {
        if takes.is_empty() {
            if p.wire.is_none() {
                if let Some(ros) = self.ros.as_mut() {
                    ros.join.stats.publishes_unjoined += 1;
                }
            }
            return;
        }
        let topic_arc = p.rec.topic.clone();
        let writer_topic = p.rec.writer.and_then(|w| self.writers.get(&w).and_then(|s| s.topic.clone()));
        let topic = writer_topic.or_else(|| topic_arc.as_ref().and_then(|t| self.ros.as_mut().map(|r| r.topic(t))));
        let host_name = self.names[p.host].clone();
        // The writer's sequence number: from the wire, else the publish order (n-th publish = sn n).
        let sn = p.wire.map(|w| w.1).or(p.rec.order.map(|n| n as i64));
        let inputs: SmallVec<[(Arc<str>, crate::ros2::join::TakeId); 2]> = p.rec.inputs.iter().map(|(t, s)| (t.clone(), (p.trace, *s))).collect();
        for (tk, join) in takes {
            let same = tk.host == p.host;
            // Across hosts, each instant by the clock tracker's line at it (none without it).
            let tracked = !same && self.clock.is_some();
            let mut sh = |v: Option<i64>, host: usize| v.map(|v| if tracked { v.saturating_add(self.clock_delta(host, v)) } else { v });
            let rclcpp = sh(p.rec.rclcpp_ts, p.host);
            let rmw = sh(p.rec.rmw_ts, p.host);
            // An intra-process delivery has no rmw_take: it starts with its callback.
            let take_ts = sh((!tk.rec.intra).then_some(tk.rec.rmw_take_ts), tk.host);
            let cbs = sh(tk.rec.callback_start_ts, tk.host);
            let cbe = sh(tk.rec.callback_end_ts, tk.host);
            let d = |a: Option<i64>, b: Option<i64>| Some(b?.saturating_sub(a?));
            let dds = d(rmw, take_ts);
            let cols = RosColumns {
                join: Some(join),
                sender_node: p.rec.node.clone(),
                receiver_node: tk.rec.node.clone(),
                rclcpp_publish_ts_ns: rclcpp,
                rmw_publish_ts_ns: rmw,
                rmw_take_ts_ns: take_ts,
                callback_start_ts_ns: cbs,
                callback_end_ts_ns: cbe,
                ros_publish_ns: d(rclcpp, rmw),
                dds_send_ns: None,
                dds_local_ns: if same { dds } else { None },
                dds_remote_ns: if same { None } else { dds },
                dds_receive_ns: None,
                executor_ns: d(take_ts, cbs),
                callback_ns: d(cbs, cbe),
                ros_e2e_ns: d(rclcpp, cbs),
                sender_thread: Some((p.rec.vpid, p.rec.vtid)),
                receiver_thread: Some((tk.rec.vpid, tk.rec.vtid)),
            };
            let receiver_name = self.names[tk.host].clone();
            let key = (topic_key(&topic, &p.rec.writer.unwrap_or_default()), topic_domain(&topic), p.host, tk.host);
            let evicted = &mut self.stats.flow_samples_evicted;
            let flow = self.flows.get_or_insert_with(key.clone(), FlowStats::default, &mut |_, f| *evicted += f.samples);
            if flow.names.is_none() {
                flow.names = topic.clone();
            }
            flow.samples += 1;
            flow.delivered += 1;
            record_ros_layers(flow, &cols);
            self.reweigh(&key);
            let source_ts = tk.rec.source_ts.or(p.rec.source_ts);
            let hop = Hop {
                take: tk.id(),
                cause: p.cause(),
                topic: tk.rec.topic.clone().or_else(|| topic_arc.clone()),
                level: if same { Delivery::SameHost } else { Delivery::Traces },
                join,
                sender: host_name.clone(),
                receiver: receiver_name.clone(),
                sender_node: p.rec.node.clone(),
                receiver_node: tk.rec.node.clone(),
                writer: p.rec.writer,
                sn,
                source_ts,
                rclcpp_ts: rclcpp,
                take_ts: tk.rec.rmw_take_ts,
                callback_start_ts: cbs,
                layers: HopLayers {
                    ros_publish: cols.ros_publish_ns,
                    dds_local: cols.dds_local_ns,
                    dds_remote: cols.dds_remote_ns,
                    executor: cols.executor_ns,
                    callback: cols.callback_ns,
                    ros_e2e: cols.ros_e2e_ns,
                    ..HopLayers::default()
                },
                inputs: inputs.clone(),
            };
            if let Some(ros) = self.ros.as_mut() {
                ros.chains.add_hop(hop);
            }
            if self.cfg.message_rows {
                let status = if same { Status::SameHost } else { Status::Traced };
                out.take(LatencyRow {
                    source_ts_ns: tk.rec.source_ts.or(p.rec.source_ts),
                    ros: Some(Box::new(cols)),
                    ..LatencyRow::new(
                        Level::Message,
                        topic.clone(),
                        p.rec.writer.unwrap_or_default(),
                        sn.unwrap_or(0),
                        host_name.clone(),
                        receiver_name,
                        status,
                        rmw.or(rclcpp).unwrap_or(tk.rec.rmw_take_ts),
                    )
                });
            }
        }
    }

    pub fn capture_names(&self) -> &[Arc<str>] {
        &self.names
    }

    /// Adds a capture point at run time (a live agent that connected); returns its index.
    pub fn add_capture(&mut self, name: &str, offset_ns: i64) -> usize {
        if let Some(i) = self.names.iter().position(|n| &**n == name) {
            return i;
        }
        assert!(self.names.len() < 64, "at most 64 capture points");
        self.names.push(Arc::from(name));
        self.cfg.captures.push(name.to_string());
        self.cfg.offsets_ns.push(offset_ns);
        self.watermarks.push(i64::MIN);
        self.spans.push((i64::MAX, i64::MIN));
        self.ended.push(false);
        let c = self.names.len() - 1;
        // A capture added as it comes (serve's agents): the first is the reference clock, the others
        // are tracked against it.
        if let Some(k) = self.clock.as_mut() {
            while k.captures() <= c {
                k.add_capture();
            }
            if self.cfg.clocks.len() == c {
                self.cfg.clocks.push(if c == 0 { ClockTrust::Reference } else { ClockTrust::Unchecked });
            }
        }
        c
    }

    /// Gives capture point `c`'s slot to a new capture point `name` (a live
    /// agent that left, evicted to make room for one that arrives; returns
    /// `c`). Everything of the old capture goes: its sightings are taken out of
    /// the samples and DATA_FRAGs still waiting (a sample only it saw is
    /// dropped unjudged), its flows and reader rows are dropped (counted in
    /// `captures_replaced`, `flows_replaced` and `flow_samples_evicted`), its
    /// votes and jitter tracks forgotten, its traces ended. The new capture
    /// starts as [`add_capture`](Self::add_capture) would start it.
    pub fn replace_capture(&mut self, c: usize, name: &str, out: &mut dyn RowSink<LatencyRow>) -> usize {
        if c >= self.names.len() {
            return self.add_capture(name, 0);
        }
        // What the old capture no longer holds back is judged first, with its sightings.
        self.set_ended(c, true, out);
        let mut gone = vec![];
        for (k, p) in self.pending.iter_mut() {
            p.seen.retain(|(x, _)| *x != c);
            p.copies.retain(|(x, _, _)| *x != c);
            if p.seen.is_empty() {
                gone.push(*k);
            }
        }
        for k in gone {
            self.pending.remove(&k);
        }
        let mut gone = vec![];
        for (k, f) in self.frags.iter_mut() {
            f.seen.retain(|(x, ..)| *x != c);
            if f.seen.is_empty() {
                gone.push(*k);
            }
        }
        for k in gone {
            self.frags.remove(&k);
        }
        for held in self.held_frags.values_mut() {
            for (_, f) in held.iter_mut() {
                f.seen.retain(|(x, ..)| *x != c);
            }
            let before = held.len();
            held.retain(|(_, f)| !f.seen.is_empty());
            self.held_count -= before - held.len();
        }
        self.held_frags.retain(|_, v| !v.is_empty());
        for (_, w) in self.writers.iter_mut() {
            w.captures &= !(1u64 << (c % 64));
            w.first_votes.retain(|(x, _)| *x != c);
            w.jitter.retain(|(x, _)| *x != c);
        }
        let flows: Vec<FlowKey> = self.flows.keys().filter(|k| k.2 == c || k.3 == c).cloned().collect();
        for k in flows {
            if let Some(f) = self.flows.remove(&k) {
                self.stats.flows_replaced += 1;
                self.stats.flow_samples_evicted += f.samples;
            }
        }
        let readers: Vec<readers::ReaderKey> = self.readers.rows.keys().filter(|k| k.1 == c || k.2 == c).cloned().collect();
        for k in readers {
            self.readers.rows.remove(&k);
        }
        self.negative_examples.retain(|(s, r, _)| *s != c && *r != c);
        if let Some(ros) = self.ros.as_mut() {
            for t in ros.traces.iter_mut().filter(|t| t.host == c) {
                t.ended = true;
            }
            if let Some(h) = ros.traced.get_mut(c) {
                *h = false;
            }
        }
        self.names[c] = Arc::from(name);
        self.cfg.captures[c] = name.to_string();
        self.cfg.offsets_ns[c] = 0;
        self.watermarks[c] = i64::MIN;
        self.spans[c] = (i64::MAX, i64::MIN);
        self.ended[c] = false;
        // A new host's clock: its line starts over (every line, when it is the reference), and the
        // participants placed by the old one's traffic are forgotten.
        if let Some(k) = self.clock.as_mut() {
            k.reset_capture(c);
            if c == 0 {
                self.sides.clear();
            } else {
                self.sides.retain(|_, x| *x != c);
            }
        }
        if let Some(t) = self.cfg.clocks.get_mut(c) {
            *t = if c == 0 { ClockTrust::Reference } else { ClockTrust::Unchecked };
        }
        if let Some(ci) = self.clock_instants.get_mut(c) {
            *ci = (0, 0);
        }
        self.stats.captures_replaced += 1;
        self.stats.flows = self.flows.len();
        self.stats.flow_bytes = self.flows.weight();
        c
    }

    /// What is known of capture point `c`'s clock (an offset the user gave: [`ClockTrust::Given`]).
    pub fn set_clock_trust(&mut self, c: usize, t: ClockTrust) {
        if self.cfg.clocks.len() <= c {
            self.cfg.clocks.resize(c + 1, ClockTrust::Unchecked);
        }
        self.cfg.clocks[c] = t;
    }

    /// Sets capture point `c`'s clock offset t_o (subtracted from its timestamps and its trace's from now on).
    pub fn set_offset(&mut self, c: usize, offset_ns: i64) {
        if let Some(o) = self.cfg.offsets_ns.get_mut(c) {
            *o = offset_ns;
        }
    }

    /// Marks a capture point as stopped (it no longer holds back judgement) or running again.
    pub fn set_ended(&mut self, c: usize, ended: bool, out: &mut dyn RowSink<LatencyRow>) {
        if c < self.ended.len() && self.ended[c] != ended {
            self.ended[c] = ended;
            if let Some(k) = self.clock.as_mut() {
                k.set_ended(c, ended);
            }
            if ended {
                self.judge_due(out);
            }
        }
    }

    /// Samples and submessages waiting for judgement.
    pub fn pending(&self) -> (usize, usize) {
        (self.pending.len(), self.frags.len())
    }

    fn corr(&self, c: usize, t: i64) -> i64 {
        t.saturating_sub(self.cfg.offsets_ns[c])
    }

    /// What to add to capture `c`'s corrected time `t` so that it reads the reference clock, by the
    /// clock tracker's line there: 0 where the offset applied already lies within the line's error
    /// bar (synchronised clocks stay as they are), for the reference, for a given offset, and where
    /// the tracker has no line (no two-way traffic around `t`).
    fn clock_delta(&mut self, c: usize, t: i64) -> i64 {
        const MIN_CORRECTION_NS: u64 = 1_000;
        if c == 0 || matches!(self.cfg.clocks.get(c), Some(ClockTrust::Given)) {
            return 0;
        }
        let base0 = self.cfg.offsets_ns.first().copied().unwrap_or(0);
        let applied = self.cfg.offsets_ns.get(c).copied().unwrap_or(0).saturating_sub(base0);
        let Some(k) = self.clock.as_mut() else { return 0 };
        let Some(f) = k.fit(c, t.saturating_add(base0)) else { return 0 };
        let o = f.offset_at(t.saturating_add(base0));
        // New fits may have placed more participants.
        let made: u64 = k.fits_made();
        if made != self.clock_fits_placed {
            self.clock_fits_placed = made;
            let n = self.names.len();
            for (prefix, capture) in k.placements() {
                if capture < n {
                    self.sides.entry(prefix).or_insert(capture);
                }
            }
        }
        if self.clock_instants.len() <= c {
            self.clock_instants.resize(c + 1, (0, 0));
        }
        // Within the line's error bar, or within a microsecond (what software time stamps resolve; on
        // one kernel clock the midpoint of a gap of ~1 µs wanders by that much), the instant is left
        // as read: synchronised clocks keep the exact capture times.
        if o.abs_diff(applied) <= (f.uncertainty_ns as u64).max(MIN_CORRECTION_NS) {
            self.clock_instants[c].1 += 1;
            0
        } else {
            self.clock_instants[c].0 += 1;
            applied.saturating_sub(o)
        }
    }

    /// A ground-truth instant of host `host` on the reference clock: by the offset and the clock line
    /// of the capture named after the host (as its capture's and trace's instants), as written where
    /// no capture has the host's name.
    fn truth_time(&mut self, host: &str, t: i64, tracked: bool) -> i64 {
        match self.names.iter().position(|n| &**n == host) {
            Some(c) => {
                let t = self.corr(c, t);
                if tracked {
                    t.saturating_add(self.clock_delta(c, t))
                } else {
                    t
                }
            }
            None => t,
        }
    }

    /// The clock tracker's account of each capture against the first (with
    /// [`CorrelatorConfig::track_clocks`]).
    pub fn clock_summaries(&self) -> Vec<ClockSummary> {
        let mut v = self.clock.as_ref().map(|k| k.summaries(&self.names)).unwrap_or_default();
        for (i, s) in v.iter_mut().enumerate() {
            // Summaries are of captures 1.. in order.
            let (moved, left) = self.clock_instants.get(i + 1).copied().unwrap_or_default();
            (s.instants_corrected, s.instants_within_bar) = (moved, left);
        }
        v
    }

    /// Flows with statistics, in topic order (as [`summaries`](Self::summaries) lists them).
    pub fn flows(&self) -> Vec<(&FlowKey, &FlowStats)> {
        let mut v: Vec<_> = self.flows.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Updates a flow's weight after new values; drops least recently updated flows over the budget.
    fn reweigh(&mut self, key: &FlowKey) {
        let Some(bytes) = self.flows.get(key).map(|f| f.heap_bytes()) else { return };
        let evicted = &mut self.stats.flow_samples_evicted;
        self.flows.set_weight(key, bytes, &mut |_, f| *evicted += f.samples);
    }


    fn note_span(&mut self, c: usize, t: i64) {
        let s = &mut self.spans[c];
        s.0 = s.0.min(t);
        s.1 = s.1.max(t);
    }

    /// Feeds one item from capture `c`; finished rows go to `out`.
    pub fn push(&mut self, c: usize, item: Item, out: &mut dyn RowSink<LatencyRow>) {
        match item {
            Item::Sample(r) => {
                if r.traffic_type != TrafficType::User {
                    return;
                }
                if r.closed_by == crate::samples::CLOSED_COPY {
                    // The same sample towards another reader: nothing for the flow's latency,
                    // but the arrival of this reader's copy for the per-reader table.
                    if let Some(dst) = r.dst {
                        let t = self.corr(c, r.first_ts_ns);
                        match self.pending.get_mut(&(r.writer_id, r.sn)) {
                            Some(p) => {
                                // Zenoh: the copy in another session at a capture that saw the sample in one already
                                // (back out on the link it came in on: a host-local topic through a router)
                                if r.zenoh_zids.is_some_and(|z| p.seen.iter().any(|(cc, k)| *cc == c && k.zids.is_some_and(|kz| kz != z))) {
                                    self.stats.zenoh_sightings_not_kept += 1;
                                }
                                note_copy(&mut p.copies, &mut self.readers, c, dst, t)
                            }
                            None => self.readers.copies_late += 1,
                        }
                    }
                    return;
                }
                if r.is_supplement() {
                    // A repair of an unfragmented sample already reported by this capture.
                    match self.pending.get_mut(&(r.writer_id, r.sn)).and_then(|p| p.seen.iter_mut().find(|(cc, _)| *cc == c)) {
                        Some((_, s)) => {
                            s.retransmitted_frags += r.retransmitted_frags;
                            s.retransmitted_bytes += r.retransmitted_bytes;
                        }
                        None => self.stats.late_repairs += 1,
                    }
                    return;
                }
                let s = Sighting {
                    first_ts: self.corr(c, r.first_ts_ns),
                    first_ip_ts: self.corr(c, r.first_ip_ts_ns),
                    last_ts: self.corr(c, r.last_ts_ns),
                    complete: r.complete,
                    retransmitted_frags: r.retransmitted_frags,
                    retransmitted_bytes: r.retransmitted_bytes,
                    frags_expected: r.frags_expected,
                    sample_size: r.sample_size,
                    zids: r.zenoh_zids,
                };
                self.note_span(c, s.first_ts);
                let w = self.writers.get_or_insert_with(r.writer_id, WriterState::default, &mut |_, _| {});
                w.captures |= 1 << c;
                if w.topic.is_none() {
                    w.topic = r.topic.clone();
                }
                if let Some(n) = r.node.as_deref() {
                    if w.node.as_deref() != Some(n.fq_name.as_str()) {
                        w.node = Some(Arc::from(n.fq_name.as_str()));
                    }
                }
                let key = (r.writer_id, r.sn);
                let first = s.first_ts;
                if !self.pending.contains_key(&key) && self.pending.len() >= self.cfg.max_pending_samples {
                    if let Some((k, p)) = self.pending.evict_lru() {
                        self.stats.samples_judged_early += 1;
                        let writer = k.0;
                        self.judge_sample(k, p, out);
                        self.release_held(writer, out);
                    }
                }
                // First-sighting order: a later sighting does not move the sample.
                let slot = self.pending.get_or_insert_keep_order(
                    key,
                    || PendingSample { first, source_ts: None, topic: None, seen: SmallVec::new(), copies: SmallVec::new() },
                    &mut |_, _| {},
                );
                let p = self.pending.value_at(slot).expect("slot just returned");
                if let Some(dst) = r.dst {
                    // a fragmented sample counts for its first destination, once complete
                    let at = if r.fragment_size.is_some() { r.complete.then_some(s.last_ts) } else { Some(s.first_ts) };
                    if let Some(at) = at {
                        note_copy(&mut p.copies, &mut self.readers, c, dst, at);
                    }
                }
                if p.topic.is_none() {
                    p.topic = r.topic;
                }
                if p.source_ts.is_none() {
                    p.source_ts = r.source_ts_ns;
                }
                match p.seen.iter().find(|(cc, _)| *cc == c) {
                    None => p.seen.push((c, s)),
                    // the sample back out on the link it came in on, in another Zenoh session (a host-local
                    // topic through a router): one sighting per capture is kept, so this hop is not measured
                    Some((_, k)) if k.zids.is_some() && s.zids.is_some() && k.zids != s.zids => self.stats.zenoh_sightings_not_kept += 1,
                    Some(_) => {}
                }
                self.stats.max_pending_samples = self.stats.max_pending_samples.max(self.pending.len());
            }
            Item::Frag(f) => {
                let first_ip = self.corr(c, f.first_ip_ts_ns);
                let last = self.corr(c, f.last_ts_ns);
                let key = (f.writer, f.sn, f.fragment_starting_num);
                if !self.frags.contains_key(&key) && self.frags.len() >= self.cfg.max_pending_submessages {
                    if let Some((k, p)) = self.frags.evict_lru() {
                        self.stats.submessages_judged_early += 1;
                        self.judge_frag(k, p, out);
                    }
                }
                let slot = self.frags.get_or_insert_keep_order(key, || PendingFrag { first_ip, topic: None, seen: SmallVec::new() }, &mut |_, _| {});
                let p = self.frags.value_at(slot).expect("slot just returned");
                if p.topic.is_none() {
                    p.topic = f.topic;
                }
                match p.seen.iter_mut().find(|s| s.0 == c) {
                    Some(s) => s.3 += 1,
                    None => p.seen.push((c, first_ip, last, 0)),
                }
                self.stats.max_pending_submessages = self.stats.max_pending_submessages.max(self.frags.len());
            }
            Item::Exchange(x) => {
                if let Some(k) = self.clock.as_mut() {
                    k.set_pairing_offset(c, self.cfg.pairing_offsets_ns.get(c).or(self.cfg.offsets_ns.get(c)).copied().unwrap_or(0));
                    k.push(c, x);
                }
            }
            Item::Watermark(t) => {
                let t = self.corr(c, t);
                self.watermarks[c] = self.watermarks[c].max(t);
                self.note_span(c, t);
                self.judge_due(out);
            }
            Item::End => {
                self.ended[c] = true;
                if let Some(k) = self.clock.as_mut() {
                    k.set_ended(c, true);
                }
                self.judge_due(out);
            }
        }
    }

    /// Whether a sighting from capture `c` comes after its time was judged:
    /// its sample (or DATA_FRAG) is not waiting and its first time is at or
    /// before every running capture's watermark less the window, or before
    /// the time judgement had already reached (while `c` had ended or fallen
    /// silent, the others' watermarks alone moved it on). Fed anyway, it
    /// would be judged as a sample of its own.
    pub fn is_late(&self, c: usize, item: &Item) -> bool {
        let horizon = self.low_watermark().saturating_sub(self.cfg.window_ns).max(self.judged_to);
        match item {
            Item::Sample(r) => !self.pending.contains_key(&(r.writer_id, r.sn)) && self.corr(c, r.first_ts_ns) <= horizon,
            Item::Frag(f) => !self.frags.contains_key(&(f.writer, f.sn, f.fragment_starting_num)) && self.corr(c, f.first_ip_ts_ns) <= horizon,
            Item::Watermark(_) | Item::End | Item::Exchange(_) => false,
        }
    }

    /// The time every still-running capture has passed.
    fn low_watermark(&self) -> i64 {
        let captures = (0..self.watermarks.len()).filter(|&c| !self.ended[c]).map(|c| self.watermarks[c]).min().unwrap_or(i64::MAX);
        match &self.ros {
            Some(r) => r.traces.iter().filter(|t| !t.ended).map(|t| t.watermark).min().unwrap_or(i64::MAX).min(captures),
            None => captures,
        }
    }

    fn judge_due(&mut self, out: &mut dyn RowSink<LatencyRow>) {
        let lw = self.low_watermark();
        let horizon = lw.saturating_sub(self.cfg.window_ns);
        // Every capture ended: everything is judged, up to the latest time seen (not i64::MAX: a capture
        // that starts later with new samples is not late).
        let seen = self.spans.iter().map(|s| s.1).max().unwrap_or(i64::MIN);
        self.judged_to = self.judged_to.max(horizon.min(seen));
        if let Some(k) = self.clock.as_mut() {
            k.forget_before(self.judged_to.saturating_add(self.cfg.offsets_ns.first().copied().unwrap_or(0)));
        }
        while self.pending.peek_lru().is_some_and(|(_, p)| p.first <= horizon) {
            if let Some((key, p)) = self.pending.pop_lru() {
                let writer = key.0;
                self.judge_sample(key, p, out);
                self.release_held(writer, out);
            }
        }
        while self.frags.peek_lru().is_some_and(|(_, p)| p.first_ip <= horizon) {
            if let Some((key, p)) = self.frags.pop_lru() {
                self.judge_frag(key, p, out);
            }
        }
        if self.ros.is_some() {
            let w = self.cfg.window_ns;
            let mut expired = vec![];
            if let Some(r) = self.ros.as_mut() {
                r.join.expire_publishes(lw.saturating_sub(w.saturating_mul(2)), &mut |p, d| expired.push((p, d)));
            }
            for (p, d) in expired {
                self.judge_publish(p, d, out);
            }
            if let Some(r) = self.ros.as_mut() {
                r.join.expire_takes(lw.saturating_sub(w.saturating_mul(3)));
                r.chains.advance(lw);
            }
        }
        self.stats.writers_evicted = self.writers.evicted();
        self.stats.flows_evicted = self.flows.evicted();
        self.stats.flows = self.flows.len();
        self.stats.flow_bytes = self.flows.weight();
    }

    /// Judges everything still pending (end of input).
    pub fn finish(&mut self, out: &mut dyn RowSink<LatencyRow>) {
        for e in self.ended.iter_mut() {
            *e = true;
        }
        if let Some(r) = self.ros.as_mut() {
            for t in r.traces.iter_mut() {
                t.ended = true;
            }
        }
        self.judge_due(out);
        self.drop_held();
        if let Some(r) = self.ros.as_mut() {
            let mut rest = vec![];
            r.join.finish(&mut |p, d| rest.push((p, d)));
            for (p, d) in rest {
                self.judge_publish(p, d, out);
            }
            if let Some(r) = self.ros.as_mut() {
                r.chains.finish();
                r.join.stats();
            }
        }
    }

    fn judge_sample(&mut self, (writer, sn): (Guid, i64), p: PendingSample, out: &mut dyn RowSink<LatencyRow>) {
        self.stats.samples_judged += 1;
        let mut p = p;
        // The sender's raw first sighting for source_ts_to_wire (INFO_TS is on the sender's clock).
        let raw_first: SmallVec<[(usize, i64); 4]> = p.seen.iter().map(|(c, s)| (*c, s.first_ts)).collect();
        let tracked = self.clock.is_some();
        if tracked {
            for i in 0..p.seen.len() {
                // Each instant by the line at it (a 10 ms sample drifts 1 µs at 100 ppm).
                let (c, s) = p.seen[i];
                let first = s.first_ts.saturating_add(self.clock_delta(c, s.first_ts));
                let first_ip = s.first_ip_ts.saturating_add(self.clock_delta(c, s.first_ip_ts));
                let last = s.last_ts.saturating_add(self.clock_delta(c, s.last_ts));
                let s = &mut p.seen[i].1;
                (s.first_ts, s.first_ip_ts, s.last_ts) = (first, first_ip, last);
                for j in 0..p.copies.len() {
                    if p.copies[j].0 == c {
                        p.copies[j].2 = p.copies[j].2.saturating_add(self.clock_delta(c, p.copies[j].2));
                    }
                }
            }
        }
        let Some(&(first_c, _)) = p.seen.iter().min_by_key(|(c, s)| (s.first_ts, *c)) else { return };
        let app = self.app.clone();
        let sides = &self.sides;
        let w = self.writers.get_or_insert_with(writer, WriterState::default, &mut |_, _| {});
        w.vote(first_c);
        // The sender from the wire (the participant's side of the two-way traffic) where it is known
        // and the capture saw the sample; else the capture that usually saw the writer's samples first.
        let placed = sides.get(&writer.prefix).copied().filter(|c| p.seen.iter().any(|(x, _)| x == c));
        if placed.is_some() {
            w.placed = placed;
        }
        let sender = placed.unwrap_or_else(|| w.sender().unwrap_or(first_c));
        if sender != first_c {
            self.stats.sender_disagreements += 1;
        }
        let topic = p.topic.clone().or_else(|| w.topic.clone());
        let wire_node = w.node.clone();
        let Some(&(_, snd)) = p.seen.iter().find(|(c, _)| *c == sender) else {
            self.stats.samples_without_sender += 1;
            return;
        };
        // Publication period from the sender's consecutive samples, or from samples a few sequence
        // numbers apart (the interval divided by the gap): a serve shard behind the Collector judges only
        // the samples routed to it, and a capture that missed a sample still gives the period.
        if let Some((psn, pts)) = w.last_sender_first {
            let gap = sn.saturating_sub(psn);
            if (1..=MAX_PERIOD_GAP).contains(&gap) && snd.first_ts > pts {
                w.intervals.record(snd.first_ts.saturating_sub(pts) / gap);
            }
        }
        if w.last_sender_first.is_none_or(|(s, _)| sn > s) {
            w.last_sender_first = Some((sn, snd.first_ts));
        }
        let period = w.period(self.cfg.period_ns);
        // The captures that saw this sample count even if the writer's state was evicted meanwhile.
        let captures = p.seen.iter().fold(w.captures, |a, (c, _)| a | 1 << c);
        let receivers: SmallVec<[usize; 4]> = (0..self.names.len()).filter(|&c| c != sender && captures & (1 << c) != 0).collect();
        if receivers.is_empty() {
            self.stats.single_capture_samples += 1;
            return;
        }
        let publish = app.publish.get(&(writer, sn));
        // The ground truth is on its host's clock, as the host's capture and trace are (one kernel
        // clock in an ordinary lab run, where the line leaves it as written; a host whose clock the
        // scenario warps stamps it with that clock).
        let publish_t = publish.map(|p| self.truth_time(&p.host, p.t_ns, tracked));
        let sender_name = self.names[sender].clone();
        let sts = p.source_ts;
        // INFO_TS and the sender's capture are on one clock: the raw capture time.
        let snd_raw_first = raw_first.iter().find(|(c, _)| *c == sender).map_or(snd.first_ts, |x| x.1);
        let src_to_wire = sts.map(|t| snd_raw_first.saturating_add(self.cfg.offsets_ns[sender]).saturating_sub(t));
        let ros_topic = topic.as_ref().is_some_and(|t| t.topic_raw.starts_with("rt/"));
        let trace_pub: Option<(Publish, Join)> = match self.ros.as_mut() {
            Some(ros) => {
                let traced = ros.traced.get(sender).copied().unwrap_or(false);
                let tn = topic.as_ref().map(|t| t.topic_name.as_str());
                ros.join.publish_for(sender, writer, sn, tn, sts, traced, ros_topic)
            }
            None => None,
        };
        // A trace is on its host's clock, as that host's capture is: each instant by the tracker's line
        // at it, as the capture's are.
        let trace_pub = trace_pub.map(|(mut pb, j)| {
            if tracked {
                let h = pb.host;
                for v in [&mut pb.rec.rclcpp_ts, &mut pb.rec.rcl_ts, &mut pb.rec.rmw_ts] {
                    *v = v.map(|v| v.saturating_add(self.clock_delta(h, v)));
                }
            }
            (pb, j)
        });
        for r in receivers {
            // A receiver that was not capturing when the sample was sent cannot judge it.
            let (span_start, span_end) = self.spans[r];
            let seen = p.seen.iter().find(|(c, _)| *c == r).map(|x| x.1);
            if seen.is_none() && (snd.first_ts < span_start || snd.first_ts > span_end) {
                continue;
            }
            let take: Option<Take> = match (self.ros.as_mut(), sts) {
                (Some(ros), Some(ts)) => ros.join.take_for(r, topic.as_ref().map(|t| t.topic_name.as_str()), ts),
                _ => None,
            };
            // Takes without source timestamp (rmw_zenoh_cpp): the subscription's queue replayed with the
            // sample's arrival at this host (its capture's clock, as its trace: the tracked line taken off).
            let take = match (take, seen.filter(|s| s.complete)) {
                (None, Some(rs)) => {
                    let arrival = if tracked { rs.last_ts.saturating_sub(self.clock_delta(r, rs.last_ts)) } else { rs.last_ts };
                    self.ros.as_mut().and_then(|ros| ros.join.take_by_arrival(r, topic.as_ref().map(|t| t.topic_name.as_str()), arrival))
                }
                (t, _) => t,
            };
            let take = take.map(|mut tk| {
                if tracked {
                    let h = tk.host;
                    tk.rec.rmw_take_ts = tk.rec.rmw_take_ts.saturating_add(self.clock_delta(h, tk.rec.rmw_take_ts));
                    for v in [&mut tk.rec.callback_start_ts, &mut tk.rec.callback_end_ts] {
                        *v = v.map(|v| v.saturating_add(self.clock_delta(h, v)));
                    }
                }
                tk
            });
            let key = (topic_key(&topic, &writer), topic_domain(&topic), sender, r);
            // per reader: the copies that reached this capture, and the ground truth's readers on its host
            let wire: SmallVec<[(readers::ReaderId, i64); 4]> = p
                .copies
                .iter()
                .filter(|(cc, _, _)| *cc == r)
                .map(|(_, dst, t)| (readers::ReaderId::Locator(*dst), t.saturating_sub(snd.first_ts)))
                .collect();
            self.readers.record(&key.0, sender, r, &wire);
            if let (Some(pb_t), Some(rcvs)) = (publish_t, app.receive.get(&(writer, sn))) {
                let host = self.names[r].clone();
                let mut truth: SmallVec<[(readers::ReaderId, i64); 4]> = SmallVec::new();
                for x in rcvs.iter().filter(|x| x.host == *host) {
                    let t = self.truth_time(&x.host, x.t_ns, tracked);
                    truth.push((readers::ReaderId::Node(Arc::from(x.node.as_str())), t.saturating_sub(pb_t)));
                }
                self.readers.record(&key.0, sender, r, &truth);
            }
            let rcv_t = app.receive_on(writer, sn, &self.names[r]).map(|rcv| self.truth_time(&rcv.host, rcv.t_ns, tracked));
            let evicted = &mut self.stats.flow_samples_evicted;
            let flow = self.flows.get_or_insert_with(key.clone(), FlowStats::default, &mut |_, f| *evicted += f.samples);
            if flow.names.is_none() {
                flow.names = topic.clone();
            }
            flow.samples += 1;
            flow.sender_by_time_order += placed.is_none() as u64;
            flow.period_ns = period;
            let repaired = snd.retransmitted_frags > 0 || seen.is_some_and(|s| s.retransmitted_frags > 0);
            if snd.retransmitted_frags > 0 {
                flow.retransmitted_samples += 1;
                flow.retransmitted_frags += snd.retransmitted_frags as u64;
                flow.retransmitted_bytes += snd.retransmitted_bytes;
            }
            let mut row = LatencyRow {
                sample_size: Some(snd.sample_size),
                frags_expected: Some(snd.frags_expected),
                sender_first_ip_ts_ns: snd.first_ip_ts,
                sender_last_ts_ns: Some(snd.last_ts),
                sender_retransmitted_frags: snd.retransmitted_frags,
                repaired,
                timing: Some(Timing::Lost),
                period_ns: period,
                app_publish_ts_ns: publish_t,
                sender_stack_ns: publish_t.map(|p| snd.first_ts.saturating_sub(p)),
                source_ts_ns: sts,
                source_ts_to_wire_ns: src_to_wire,
                ..LatencyRow::new(Level::Message, topic.clone(), writer, sn, sender_name.clone(), self.names[r].clone(), Status::Lost, snd.first_ts)
            };
            if let Some(s) = row.sender_stack_ns {
                flow.layer(Layer::SenderStack, s);
            }
            if let Some(s) = src_to_wire {
                flow.layer(Layer::SourceTsToWire, s);
            }
            match seen {
                Some(rs) if rs.complete => {
                    flow.delivered += 1;
                    let lat = rs.last_ts.saturating_sub(snd.first_ts);
                    let first_first = rs.first_ts.saturating_sub(snd.first_ts);
                    let last_last = rs.last_ts.saturating_sub(snd.last_ts);
                    row.status = Status::Delivered;
                    row.receiver_first_ts_ns = Some(rs.first_ts);
                    row.receiver_last_ts_ns = Some(rs.last_ts);
                    row.latency_ns = Some(lat);
                    row.first_first_ns = Some(first_first);
                    row.last_last_ns = Some(last_last);
                    row.receiver_duplicate_frags = rs.retransmitted_frags;
                    flow.layer(Layer::Message, lat);
                    flow.layer(Layer::FirstFirst, first_first);
                    flow.layer(Layer::LastLast, last_last);
                    if repaired {
                        flow.repaired.record(lat);
                    } else {
                        flow.clean.record(lat);
                    }
                    if lat < 0 {
                        self.stats.negative_latencies += 1;
                        if self.negative_examples.len() < 1000 {
                            self.negative_examples.push((sender, r, lat));
                        }
                    }
                    // The writer was touched at the top of this function: still present.
                    let j = self.writers.get_mut(&writer).and_then(|w| w.jitter(r).next(sn, lat));
                    if let Some(j) = j {
                        flow.jitter_signed.record(j);
                        flow.jitter_abs.record(j.saturating_abs());
                    }
                    row.jitter_ns = j;
                    // The row uses the period known so far; the summary classifies
                    // every sample against the final period (see summaries()).
                    row.timing = match period {
                        Some(per) if lat <= per => Some(Timing::InTime),
                        Some(_) => Some(Timing::Late),
                        None => None,
                    };
                    if let Some(rcv_t) = rcv_t {
                        let stack = rcv_t.saturating_sub(rs.last_ts);
                        row.app_receive_ts_ns = Some(rcv_t);
                        row.receiver_stack_ns = Some(stack);
                        flow.layer(Layer::ReceiverStack, stack);
                        if let Some(p) = publish_t {
                            let app_lat = rcv_t.saturating_sub(p);
                            row.app_latency_ns = Some(app_lat);
                            flow.layer(Layer::Application, app_lat);
                        }
                    }
                }
                Some(rs) => {
                    // Some fragments arrived (or the receiver's capture ended
                    // while the sample was in flight): incomplete, not lost —
                    // every sample ends in exactly one state.
                    flow.incomplete += 1;
                    row.status = Status::Incomplete;
                    row.receiver_first_ts_ns = Some(rs.first_ts);
                }
                None => {
                    flow.lost += 1;
                    if flow.lost_examples.len() < 10 {
                        flow.lost_examples.push(sn);
                    }
                }
            }
            if trace_pub.is_some() || take.is_some() {
                let pb = trace_pub.as_ref().map(|x| &x.0);
                let rclcpp = pb.and_then(|p| p.rec.rclcpp_ts);
                let rmw = pb.and_then(|p| p.rec.rmw_ts);
                // A take begun at rcl_take (no rmw_take in the trace: rmw_zenoh_cpp) has no rmw_take instant.
                let take_ts = take.as_ref().filter(|t| !crate::ros2::assemble::is_rcl_take(&t.rec)).map(|t| t.rec.rmw_take_ts);
                let cbs = take.as_ref().and_then(|t| t.rec.callback_start_ts);
                let cbe = take.as_ref().and_then(|t| t.rec.callback_end_ts);
                let d = |a: Option<i64>, b: Option<i64>| Some(b?.saturating_sub(a?));
                let complete_at = row.receiver_last_ts_ns.filter(|_| row.status == Status::Delivered);
                let cols = RosColumns {
                    dds_remote_ns: None,
                    join: trace_pub.as_ref().map(|x| x.1).or(take.as_ref().map(|t| if crate::ros2::assemble::is_rcl_take(&t.rec) { Join::TakeQueue } else { Join::SourceTs })),
                    sender_node: pb.and_then(|p| p.rec.node.clone()).or_else(|| wire_node.clone()),
                    receiver_node: take.as_ref().and_then(|t| t.rec.node.clone()),
                    rclcpp_publish_ts_ns: rclcpp,
                    rmw_publish_ts_ns: rmw,
                    rmw_take_ts_ns: take_ts,
                    callback_start_ts_ns: cbs,
                    callback_end_ts_ns: cbe,
                    ros_publish_ns: d(rclcpp, rmw),
                    dds_send_ns: d(rmw, Some(snd.first_ts)),
                    dds_local_ns: None,
                    dds_receive_ns: d(complete_at, take_ts),
                    executor_ns: d(take_ts, cbs),
                    callback_ns: d(cbs, cbe),
                    ros_e2e_ns: d(rclcpp, cbs),
                    sender_thread: pb.map(|p| (p.rec.vpid, p.rec.vtid)),
                    receiver_thread: take.as_ref().map(|t| (t.rec.vpid, t.rec.vtid)),
                };
                record_ros_layers(flow, &cols);
                if let (Some(tk), Some(ros)) = (take.as_ref(), self.ros.as_mut()) {
                    ros.chains.add_hop(Hop {
                        take: tk.id(),
                        cause: pb.and_then(|p| p.cause()),
                        topic: tk.rec.topic.clone().or_else(|| pb.and_then(|p| p.rec.topic.clone())),
                        level: Delivery::Wire,
                        join: cols.join.unwrap_or(Join::None),
                        sender: sender_name.clone(),
                        receiver: self.names[r].clone(),
                        sender_node: cols.sender_node.clone(),
                        receiver_node: cols.receiver_node.clone(),
                        writer: Some(writer),
                        sn: Some(sn),
                        source_ts: tk.rec.source_ts.or(sts),
                        rclcpp_ts: rclcpp,
                        take_ts: tk.rec.rmw_take_ts,
                        callback_start_ts: cbs,
                        inputs: pb.map(|p| p.rec.inputs.iter().map(|(t, s)| (t.clone(), (p.trace, *s))).collect()).unwrap_or_default(),
                        layers: HopLayers {
                            ros_publish: cols.ros_publish_ns,
                            dds_send: cols.dds_send_ns,
                            message: row.latency_ns,
                            dds_receive: cols.dds_receive_ns,
                            dds_local: None,
                            dds_remote: None,
                            executor: cols.executor_ns,
                            callback: cols.callback_ns,
                            ros_e2e: cols.ros_e2e_ns,
                        },
                    });
                }
                row.ros = Some(Box::new(cols));
            } else if wire_node.is_some() {
                // No trace: the sender's node from the ROS graph on the wire.
                flow.note_nodes(wire_node.as_ref(), None);
                row.ros = Some(Box::new(RosColumns { sender_node: wire_node.clone(), ..RosColumns::default() }));
            }
            self.reweigh(&key);
            if self.cfg.message_rows {
                row.clock_error_ns = self.row_clock_error(sender, row.sender_first_ts_ns, r, row.receiver_last_ts_ns.or(row.receiver_first_ts_ns).unwrap_or(row.sender_first_ts_ns));
                out.take(row);
            }
        }
        self.judge_router_hops(writer, sn, sender, &p, &topic, sts, out);
    }

    /// The router hop (docs/zenoh.md, "Through a router"): a Zenoh node that
    /// received the sample in one session and sent it on in another, both
    /// captured (sessions named by their Zenoh ids, from the captured
    /// handshakes; RTPS sightings have none, so nothing happens for them).
    /// In: of the captures that saw the sample complete on its way to the
    /// node, the one where it completed last (nearest the node); out, for each
    /// session it left the node on: the capture where its first byte came
    /// first. One `router` row and layer value per (in, out): first byte out −
    /// completion in.
    #[allow(clippy::too_many_arguments)]
    fn judge_router_hops(&mut self, writer: Guid, sn: i64, sender: usize, p: &PendingSample, topic: &Option<Arc<TopicNames>>, sts: Option<i64>, out: &mut dyn RowSink<LatencyRow>) {
        if !p.seen.iter().any(|(_, s)| s.zids.is_some()) {
            return;
        }
        let mut pairs: SmallVec<[(usize, Sighting, usize, Sighting); 2]> = SmallVec::new();
        for &(oc, o) in p.seen.iter() {
            let Some((node, to)) = o.zids else { continue };
            if p.seen.iter().any(|(c, s)| s.zids == o.zids && (s.first_ts, *c) < (o.first_ts, oc)) {
                continue; // another capture saw this session's copy first
            }
            let inbound = p
                .seen
                .iter()
                .filter(|(c, s)| *c != oc && s.complete && s.zids.is_some_and(|(from, at)| at == node && from != to))
                .max_by_key(|(c, s)| (s.last_ts, std::cmp::Reverse(*c)));
            if let Some(&(ic, i)) = inbound {
                pairs.push((ic, i, oc, o));
            }
        }
        for (ic, i, oc, o) in pairs {
            let hop = o.first_ts.saturating_sub(i.last_ts);
            let key = (topic_key(topic, &writer), topic_domain(topic), ic, oc);
            let evicted = &mut self.stats.flow_samples_evicted;
            let flow = self.flows.get_or_insert_with(key.clone(), FlowStats::default, &mut |_, f| *evicted += f.samples);
            if flow.names.is_none() {
                flow.names = topic.clone();
            }
            flow.layer(Layer::Router, hop);
            // The flow between the router's two capture points: every sample forwarded, delivered
            // once complete (unless the inbound capture is the sample's sender: that flow counts it already).
            if ic != sender {
                flow.samples += 1;
                if o.complete {
                    flow.delivered += 1;
                } else {
                    flow.incomplete += 1;
                }
            }
            self.reweigh(&key);
            if self.cfg.message_rows {
                let status = if o.complete { Status::Delivered } else { Status::Incomplete };
                out.take(LatencyRow {
                    sample_size: Some(o.sample_size),
                    frags_expected: Some(o.frags_expected),
                    sender_first_ip_ts_ns: i.first_ip_ts,
                    sender_last_ts_ns: Some(i.last_ts),
                    receiver_first_ts_ns: Some(o.first_ts),
                    receiver_last_ts_ns: o.complete.then_some(o.last_ts),
                    latency_ns: Some(hop),
                    source_ts_ns: sts,
                    ..LatencyRow::new(Level::Router, topic.clone(), writer, sn, self.names[ic].clone(), self.names[oc].clone(), status, i.first_ts)
                });
            }
        }
    }

    /// Judges the DATA_FRAGs held for `writer` once its sender is known.
    fn release_held(&mut self, writer: Guid, out: &mut dyn RowSink<LatencyRow>) {
        if self.held_count == 0 || !self.writers.get(&writer).is_some_and(|w| w.sender().is_some()) {
            return;
        }
        if let Some(held) = self.held_frags.remove(&writer) {
            self.held_count -= held.len();
            for (k, p) in held {
                self.judge_frag(k, p, out);
            }
        }
    }

    /// Held DATA_FRAGs whose writer never got a sender: counted as dropped.
    fn drop_held(&mut self) {
        self.stats.submessages_held_dropped += self.held_count as u64;
        self.held_frags.clear();
        self.held_count = 0;
    }

    fn judge_frag(&mut self, key: (Guid, i64, u32), p: PendingFrag, out: &mut dyn RowSink<LatencyRow>) {
        let (writer, sn, frag) = key;
        let mut p = p;
        if self.clock.is_some() {
            for i in 0..p.seen.len() {
                let c = p.seen[i].0;
                p.seen[i].1 = p.seen[i].1.saturating_add(self.clock_delta(c, p.seen[i].1));
                p.seen[i].2 = p.seen[i].2.saturating_add(self.clock_delta(c, p.seen[i].2));
            }
        }
        let Some(sender) = self.writers.get(&writer).and_then(|w| w.sender()) else {
            // No sample of this writer judged yet: hold until one is (bounded; the newest refused, counted).
            if self.held_count >= self.cfg.max_pending_submessages {
                self.stats.submessages_held_dropped += 1;
            } else {
                self.stats.submessages_held += 1;
                self.held_count += 1;
                self.held_frags.entry(writer).or_default().push((key, p));
            }
            return;
        };
        let Some(w) = self.writers.get(&writer) else { return };
        let Some(&(_, s_first_ip, s_last, s_dups)) = p.seen.iter().find(|s| s.0 == sender) else {
            self.stats.submessages_without_sender += 1;
            return;
        };
        self.stats.submessages_judged += 1;
        let topic = p.topic.clone().or_else(|| w.topic.clone());
        for &(r, _r_first_ip, r_last, r_dups) in p.seen.iter().filter(|s| s.0 != sender) {
            let lat = r_last.saturating_sub(s_first_ip);
            let clock_error_ns = if self.cfg.submessage_rows { self.row_clock_error(sender, s_first_ip, r, r_last) } else { None };
            let key = (topic_key(&topic, &writer), topic_domain(&topic), sender, r);
            let evicted = &mut self.stats.flow_samples_evicted;
            let flow = self.flows.get_or_insert_with(key.clone(), FlowStats::default, &mut |_, f| *evicted += f.samples);
            if flow.names.is_none() {
                flow.names = topic.clone();
            }
            flow.layer(Layer::Submessage, lat);
            self.reweigh(&key);
            if self.cfg.submessage_rows {
                out.take(LatencyRow {
                    clock_error_ns,
                    fragment_starting_num: Some(frag),
                    sender_last_ts_ns: Some(s_last),
                    receiver_last_ts_ns: Some(r_last),
                    latency_ns: Some(lat),
                    sender_retransmitted_frags: s_dups,
                    receiver_duplicate_frags: r_dups,
                    repaired: s_dups > 0 || r_dups > 0,
                    ..LatencyRow::new(
                        Level::Submessage,
                        topic.clone(),
                        writer,
                        sn,
                        self.names[sender].clone(),
                        self.names[r].clone(),
                        Status::Delivered,
                        s_first_ip,
                    )
                });
            }
        }
    }

    /// Per-flow summaries, in topic order.
    /// The error bar (ns) of a figure from capture `a`'s instant `ta` to capture `b`'s `tb`: the two
    /// clock lines' there added (0 on one clock; None where either clock was not checked).
    fn row_clock_error(&mut self, a: usize, ta: i64, b: usize, tb: i64) -> Option<i64> {
        if a == b {
            return Some(0);
        }
        Some(self.clock_bar(a, ta)?.saturating_add(self.clock_bar(b, tb)?))
    }

    /// How far capture `c`'s clock may be from the reference's at its corrected instant `t` (ns).
    fn clock_bar(&mut self, c: usize, t: i64) -> Option<i64> {
        let trust = self.cfg.clocks.get(c).copied().unwrap_or_default();
        if c == 0 || trust == ClockTrust::Reference {
            return Some(0);
        }
        if trust == ClockTrust::Given {
            return None;
        }
        let base0 = self.cfg.offsets_ns.first().copied().unwrap_or(0);
        let line = self.clock.as_mut().and_then(|k| k.peek(c, t.saturating_add(base0)));
        match (trust, line) {
            (ClockTrust::Estimated(u), Some(f)) => Some(u.max(f.uncertainty_ns)),
            (ClockTrust::Estimated(u), None) => Some(u),
            (_, Some(f)) => Some(f.uncertainty_ns),
            _ => None,
        }
    }

    /// What is known of the clocks of captures `a` and `b` together: (`checked`|`given`|`unchecked`,
    /// the error bar of a figure taken between them, ns).
    pub fn clock_between(&self, a: usize, b: usize) -> (&'static str, Option<i64>) {
        let trust = |c: usize| {
            let t = self.cfg.clocks.get(c).copied().unwrap_or_default();
            // The tracker's lines, where it made some: the mean error bar of those that corrected samples.
            match (t, self.clock.as_ref().and_then(|k| k.mean_uncertainty(c))) {
                (ClockTrust::Given | ClockTrust::Reference, _) | (_, None) => t,
                (ClockTrust::Estimated(u), Some(v)) => ClockTrust::Estimated(u.max(v)),
                (ClockTrust::Unchecked, Some(v)) => ClockTrust::Estimated(v),
            }
        };
        if a == b {
            return ("checked", Some(0));
        }
        match (trust(a), trust(b)) {
            (ClockTrust::Unchecked, _) | (_, ClockTrust::Unchecked) => ("unchecked", None),
            (ClockTrust::Given, _) | (_, ClockTrust::Given) => ("given", None),
            (x, y) => {
                let u = |t: ClockTrust| if let ClockTrust::Estimated(u) = t { u } else { 0 };
                ("checked", Some(u(x).saturating_add(u(y))))
            }
        }
    }

    pub fn summaries(&self) -> Vec<FlowSummary> {
        // In time: delivered with a message latency no longer than the period (Kouril et al.).
        let in_time = |f: &FlowStats| match (f.period_ns, f.layers.get(&Layer::Message)) {
            (Some(p), Some(d)) => d.count_at_most(p),
            _ => 0,
        };
        let router_only = |f: &FlowStats| f.layers.contains_key(&Layer::Router) && !f.layers.contains_key(&Layer::Message);
        self.flows()
            .into_iter()
            .map(|((topic, domain, s, r), f)| {
                let clock = self.clock_between(*s, *r);
                let layers = f.layers.iter().filter(|(_, d)| d.count() > 0).map(|(l, d)| (*l, d.summary())).collect();
                FlowSummary {
                    topic: topic.clone(),
                    domain: *domain,
                    names: f.names.clone(),
                    sender: self.names[*s].to_string(),
                    receiver: self.names[*r].to_string(),
                    samples: f.samples,
                    delivered: f.delivered,
                    lost: f.lost,
                    incomplete: f.incomplete,
                    retransmitted_samples: f.retransmitted_samples,
                    retransmitted_frags: f.retransmitted_frags,
                    retransmitted_bytes: f.retransmitted_bytes,
                    period_ms: f.period_ns.map(|p| p as f64 / 1e6),
                    in_time: in_time(f),
                    // A router hop's flow has no message latency to be late with.
                    late: if router_only(f) { 0 } else { f.delivered.saturating_sub(in_time(f)) },
                    layers,
                    jitter: f.jitter_signed.summary(),
                    jitter_abs: f.jitter_abs.summary(),
                    repaired: f.repaired.summary(),
                    clean: f.clean.summary(),
                    lost_examples: f.lost_examples.clone(),
                    sender_nodes: f.sender_nodes.iter().map(|n| n.to_string()).collect(),
                    receiver_nodes: f.receiver_nodes.iter().map(|n| n.to_string()).collect(),
                    sender_from: if f.sender_by_time_order == 0 { "wire" } else { "time order" },
                    clock: clock.0,
                    clock_uncertainty_ns: clock.1,
                }
            })
            .collect()
    }

    /// Which capture sends each writer, and who receives it.
    pub fn writer_roles(&self) -> Vec<WriterRole> {
        let mut v: Vec<WriterRole> = self
            .writers
            .iter()
            .filter_map(|(g, w)| {
                let s = w.sender()?;
                Some(WriterRole {
                    writer_id: g.to_string(),
                    topic: w.topic.as_ref().map(|t| t.topic_name.clone()),
                    sender: self.names[s].to_string(),
                    receivers: (0..self.names.len())
                        .filter(|&c| c != s && w.captures & (1 << c) != 0)
                        .map(|c| self.names[c].to_string())
                        .collect(),
                    first_seen_votes: w.first_votes.iter().map(|(c, v)| (self.names[*c].to_string(), *v)).collect(),
                })
            })
            .collect();
        v.sort_by(|a, b| (&a.topic, &a.writer_id).cmp(&(&b.topic, &b.writer_id)));
        v
    }

    /// Warnings for the user: negative latencies with the offset they suggest,
    /// writers whose sender capture is ambiguous.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = vec![];
        let mut by_pair: BTreeMap<(usize, usize), Vec<i64>> = BTreeMap::new();
        for (s, r, l) in &self.negative_examples {
            by_pair.entry((*s, *r)).or_default().push(*l);
        }
        for ((s, r), mut v) in by_pair {
            v.sort();
            let worst = v[0];
            // Within the clocks' error bar a small negative value is what the bar allows: not a sign of an offset.
            if self.clock_between(s, r).1.is_some_and(|u| worst.unsigned_abs() <= u as u64 + 1_000) {
                continue;
            }
            let n = self.stats.negative_latencies;
            w.push(format!(
                "{n} negative latencies from {} to {} (down to {:.3} ms): {}'s clock seems to run behind {}'s by at least {:.3} ms; \
                 give --offset {}=-{:.3}ms (or more), or drop --no-estimate (the estimate from the traffic is the default)",
                self.names[s],
                self.names[r],
                worst as f64 / 1e6,
                self.names[r],
                self.names[s],
                -worst as f64 / 1e6,
                self.names[r],
                -worst as f64 / 1e6
            ));
        }
        // Captures that do not overlap in time: clocks far apart (or not the same time).
        for a in 0..self.names.len() {
            for b in a + 1..self.names.len() {
                let ((a0, a1), (b0, b1)) = (self.spans[a], self.spans[b]);
                if a0 > a1 || b0 > b1 {
                    continue;
                }
                let overlap = a1.min(b1).saturating_sub(a0.max(b0));
                let shorter = a1.saturating_sub(a0).min(b1.saturating_sub(b0)).max(1);
                if overlap < shorter / 2 {
                    w.push(format!(
                        "the capture times of {} and {} hardly overlap ({} starts {:+.3} s after {}): their clocks differ, or they \
                         were not taken at the same time; give --offset {}=±DURATION or drop --no-estimate (the estimate from the traffic is the default)",
                        self.names[a],
                        self.names[b],
                        self.names[b],
                        b0.saturating_sub(a0) as f64 / 1e9,
                        self.names[a],
                        self.names[b]
                    ));
                }
            }
        }
        if self.stats.samples_without_sender > 0 {
            w.push(format!(
                "{} samples were seen at other captures but not at their writer's sender capture: no latency for them \
                 (that capture missed them: dropped by the kernel, or it started late or ended early)",
                self.stats.samples_without_sender
            ));
        }
        if self.stats.zenoh_sightings_not_kept > 0 {
            w.push(format!(
                "{} Zenoh sightings of samples that came back out on the link they came in on (host-local topics through a \
                 router) were not kept: one sighting per capture is, so those router hops have no row",
                self.stats.zenoh_sightings_not_kept
            ));
        }
        if self.stats.sender_disagreements > 0 {
            w.push(format!(
                "{} samples were first seen at a capture other than their writer's sender: the clocks were offset by more than the one-way delay then (see the clock lines; give --offset NAME=±DURATION if the estimate is wrong)",
                self.stats.sender_disagreements
            ));
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::item::FragSighting;
    use crate::samples::SampleRecord;
    use ddscope_wire::{EntityId, GuidPrefix};

    fn writer() -> Guid {
        Guid::new(GuidPrefix([1; 12]), EntityId([0, 0, 1, 3]))
    }

    fn rec(cap: &str, sn: i64, first: i64, last: i64, complete: bool, retx: u32) -> SampleRecord {
        SampleRecord {
            capture: Arc::from(cap),
            writer_id: writer(),
            sn,
            topic: Some(Arc::new(TopicNames::new("rt/image", "sensor_msgs::msg::dds_::Image_"))),
            node: None,
            traffic_type: TrafficType::User,
            first_ts_ns: first,
            first_ip_ts_ns: first - 10,
            last_ts_ns: last,
            complete,
            first_frame: 1,
            last_frame: 2,
            sample_size: 1000,
            fragment_size: None,
            frags_expected: 1,
            frags_seen: 1,
            submsgs: 1,
            ip_frags: 1,
            bytes: 1000,
            retransmitted_frags: retx,
            retransmitted_bytes: retx as u64 * 100,
            destinations: 1,
            nack_frags: 0,
            pcp: None,
            vendor_id: 0x0110,
            closed_by: crate::samples::ClosedBy::Complete,
            source_ts_ns: None,
            dst: None,
            zenoh_zids: None,
        }
    }

    fn correlator(offset_b: i64, app: AppTruth) -> Correlator {
        Correlator::new(
            CorrelatorConfig {
                captures: vec!["pc1".into(), "pc2".into()],
                offsets_ns: vec![0, offset_b],
                window_ns: 1_000_000_000,
                period_ns: None,
                message_rows: true,
                submessage_rows: true,
                ..Default::default()
            },
            Arc::new(app),
        )
    }

    const MS: i64 = 1_000_000;

    /// 10 samples at 100 ms; pc2 (clock `skew` ahead) sees each 2 ms + k·0.1 ms later; sample 5 is lost.
    fn feed(c: &mut Correlator, skew: i64) -> Vec<LatencyRow> {
        let mut rows = vec![];
        for sn in 1..=10i64 {
            let t = sn * 100 * MS;
            c.push(0, Item::Sample(rec("pc1", sn, t, t + MS, true, if sn == 3 { 2 } else { 0 })), &mut |r| rows.push(r));
            if sn != 5 {
                let d = 2 * MS + sn * MS / 10;
                c.push(1, Item::Sample(rec("pc2", sn, t + d - MS / 2 + skew, t + d + skew, true, 0)), &mut |r| rows.push(r));
            }
            c.push(0, Item::Watermark(t), &mut |r| rows.push(r));
            c.push(1, Item::Watermark(t + skew), &mut |r| rows.push(r));
        }
        c.finish(&mut |r| rows.push(r));
        rows
    }

    #[test]
    fn message_latency_loss_jitter_and_period() {
        let mut c = correlator(0, AppTruth::default());
        let rows = feed(&mut c, 0);
        assert_eq!(rows.len(), 10);
        let r4 = rows.iter().find(|r| r.sn == 4).unwrap();
        assert_eq!(&*r4.sender, "pc1");
        assert_eq!(r4.latency_ns, Some(2 * MS + 4 * MS / 10));
        assert_eq!(r4.first_first_ns, Some(2 * MS + 4 * MS / 10 - MS / 2));
        assert_eq!(r4.last_last_ns, Some(2 * MS + 4 * MS / 10 - MS));
        assert_eq!(r4.jitter_ns, Some(MS / 10));
        assert_eq!(rows.iter().find(|r| r.sn == 5).unwrap().status, "lost");
        assert!(rows.iter().find(|r| r.sn == 3).unwrap().repaired);
        let f = &c.summaries()[0];
        assert_eq!((f.samples, f.delivered, f.lost), (10, 9, 1));
        assert_eq!(f.retransmitted_samples, 1);
        assert_eq!(f.period_ms, Some(100.0));
        assert_eq!((f.in_time, f.late), (9, 0));
        let m = f.layers.iter().find(|(l, _)| l == "message").unwrap().1;
        assert_eq!(m.count, 9);
        assert!((m.min_ms - 2.1).abs() < 1e-9 && (m.max_ms - 3.0).abs() < 1e-9);
        // Jitter is only defined between consecutive samples: 5 is missing, so 4->6 is skipped.
        assert_eq!(f.jitter.count, 7);
        assert!(c.warnings().is_empty());
    }

    #[test]
    fn offsets_are_subtracted_and_sender_found_despite_skew() {
        // pc2's clock runs 37 s ahead; with --offset pc2=+37s the latencies are the same.
        let skew = 37_000 * MS;
        let mut c = correlator(skew, AppTruth::default());
        let rows = feed(&mut c, skew);
        assert_eq!(rows.iter().find(|r| r.sn == 4).unwrap().latency_ns, Some(2 * MS + 4 * MS / 10));
        // Without the offset pc2 would look like the sender by 37 s.
        let mut c = correlator(0, AppTruth::default());
        let rows = feed(&mut c, -skew);
        assert_eq!(&*rows[0].sender, "pc2");
        assert!(c.warnings().is_empty() || c.stats.negative_latencies == 0);
    }

    #[test]
    fn negative_latency_warns_with_the_offset() {
        // pc2 runs 1 ms behind: latencies of 2..3 ms become 1..2 ms; 3 ms behind makes them negative,
        // but pc1 still sends first only if the skew is smaller than the latency; use a skew that
        // flips the first-first difference but keeps the sender via the first sample's vote.
        let mut c = correlator(0, AppTruth::default());
        let mut rows = vec![];
        let t = 100 * MS;
        c.push(0, Item::Sample(rec("pc1", 1, t, t + 5 * MS, true, 0)), &mut |r| rows.push(r));
        c.push(1, Item::Sample(rec("pc2", 1, t + MS, t + 2 * MS, true, 0)), &mut |r| rows.push(r));
        c.finish(&mut |r| rows.push(r));
        assert_eq!(rows[0].last_last_ns, Some(-3 * MS));
        assert_eq!(c.stats.negative_latencies, 0, "message latency itself is positive");
        let mut c = correlator(0, AppTruth::default());
        c.push(0, Item::Sample(rec("pc1", 1, t, t, true, 0)), &mut |_| {});
        c.push(1, Item::Sample(rec("pc2", 1, t + MS, t - 2 * MS, true, 0)), &mut |_| {});
        c.finish(&mut |_| {});
        assert_eq!(c.stats.negative_latencies, 1);
        assert!(c.warnings()[0].contains("--offset pc2=-2.000ms"), "{:?}", c.warnings());
    }

    #[test]
    fn application_layer_splits_into_stacks() {
        let mut app = AppTruth::default();
        let dir = std::env::temp_dir().join(format!("ddscope-truth-{}.jsonl", std::process::id()));
        let mut lines = String::new();
        for sn in 1..=10i64 {
            let t = sn * 100 * MS;
            lines += &format!(
                "{{\"event\":\"publish\",\"t_ns\":{},\"host\":\"pc1\",\"node\":\"n\",\"topic\":\"/image\",\"writer_guid\":\"{}\",\"seq\":{sn},\"size\":1000}}\n",
                t - MS / 5,
                writer()
            );
            lines += &format!(
                "{{\"event\":\"receive\",\"t_ns\":{},\"host\":\"pc2\",\"node\":\"m\",\"topic\":\"/image\",\"writer_guid\":\"{}\",\"seq\":{sn},\"size\":1000}}\n",
                t + 2 * MS + sn * MS / 10 + MS / 4,
                writer()
            );
        }
        std::fs::write(&dir, lines).unwrap();
        app.load(&dir).unwrap();
        std::fs::remove_file(&dir).ok();
        let mut c = correlator(0, app);
        let rows = feed(&mut c, 0);
        let r = rows.iter().find(|r| r.sn == 2).unwrap();
        assert_eq!(r.sender_stack_ns, Some(MS / 5));
        assert_eq!(r.receiver_stack_ns, Some(MS / 4));
        assert_eq!(r.app_latency_ns, Some(MS / 5 + r.latency_ns.unwrap() + MS / 4));
        let f = &c.summaries()[0];
        assert!(f.layers.iter().any(|(l, s)| l == "application" && s.count == 9));
    }

    #[test]
    fn bad_ground_truth_names_file_and_line() {
        let dir = std::env::temp_dir().join(format!("ddscope-badtruth-{}.jsonl", std::process::id()));
        std::fs::write(&dir, "{\"event\":\"publish\",\"t_ns\":1,\"host\":\"a\",\"writer_guid\":\"xyz\",\"seq\":1}\n").unwrap();
        let e = AppTruth::default().load(&dir).unwrap_err().to_string();
        std::fs::remove_file(&dir).ok();
        assert!(e.contains("line 1") && e.contains("writer_guid"), "{e}");
    }

    fn frag(sn: i64, first_ip: i64) -> Item {
        Item::Frag(FragSighting { writer: writer(), sn, fragment_starting_num: 1, first_ip_ts_ns: first_ip, last_ts_ns: first_ip + MS, topic: None })
    }

    fn submessage_count(c: &Correlator) -> u64 {
        c.summaries().iter().flat_map(|f| f.layers.iter()).filter(|(l, _)| l == "submessage").map(|(_, d)| d.count).sum()
    }

    /// Oracle: the fed sightings themselves. A DATA_FRAG due before any sample
    /// of its writer was judged (its sample falls due later: the frag's first
    /// IP fragment precedes the sample's first sighting) is held and judged
    /// once the sample is, not dropped: every fragment seen at both captures
    /// is measured, with the latency fed.
    #[test]
    fn fragments_due_before_the_writers_sender_is_known_are_held_then_judged() {
        let mut c = correlator(0, AppTruth::default());
        let mut rows = vec![];
        for sn in 1..=3i64 {
            let t = sn * 100 * MS;
            c.push(0, frag(sn, t - 60 * MS), &mut |r| rows.push(r));
            c.push(1, frag(sn, t - 57 * MS), &mut |r| rows.push(r));
            c.push(0, Item::Sample(rec("pc1", sn, t, t + MS, true, 0)), &mut |r| rows.push(r));
            c.push(1, Item::Sample(rec("pc2", sn, t + 2 * MS, t + 3 * MS, true, 0)), &mut |r| rows.push(r));
        }
        // Horizon 70 ms: sample 1's fragment (40 ms) is due, sample 1 (100 ms) is not.
        for cap in 0..2 {
            c.push(cap, Item::Watermark(1_070 * MS), &mut |r| rows.push(r));
        }
        assert_eq!(c.stats.submessages_held, 1);
        assert_eq!(c.stats.submessages_judged, 0);
        c.finish(&mut |r| rows.push(r));
        assert_eq!(c.stats.submessages_judged, 3);
        assert_eq!(c.stats.submessages_held_dropped, 0);
        assert_eq!(submessage_count(&c), 3);
        let held = rows.iter().find(|r| r.level == Level::Submessage && r.sn == 1).expect("sample 1's fragment judged");
        // Receiver's last (43 ms + 1 ms) minus the sender's first IP fragment (40 ms).
        assert_eq!(held.latency_ns, Some(4 * MS));
        assert!(c.stats.problem_line().is_none());
    }

    /// Oracle: the fed sightings. Fragments of a writer none of whose samples
    /// is ever judged cannot be measured: dropped at the end and counted; more
    /// than `max_pending_submessages` held at once: the newest refused, counted.
    #[test]
    fn held_fragments_without_a_sender_are_counted_when_dropped() {
        let mut c = Correlator::new(
            CorrelatorConfig {
                captures: vec!["pc1".into(), "pc2".into()],
                offsets_ns: vec![0, 0],
                window_ns: MS,
                max_pending_submessages: 2,
                submessage_rows: true,
                ..Default::default()
            },
            Arc::new(AppTruth::default()),
        );
        let mut rows = vec![];
        for sn in 1..=5i64 {
            c.push(0, frag(sn, sn * MS), &mut |r| rows.push(r));
        }
        c.finish(&mut |r| rows.push(r));
        assert!(rows.is_empty());
        assert_eq!(c.stats.submessages_judged, 0);
        // 5 sightings, at most 2 pending: 3 judged early, the first 2 of them held (the cap), the 3rd refused;
        // the last 2 judged at the end are refused too (2 still held); the 2 held are dropped at the end.
        assert_eq!(c.stats.submessages_judged_early, 3);
        assert_eq!(c.stats.submessages_held, 2);
        assert_eq!(c.stats.submessages_held_dropped, 5);
        let line = c.stats.problem_line().expect("drops reported");
        assert!(line.contains("5 DATA_FRAG submessages dropped unjudged"), "{line}");
    }

    /// Oracle: the fed sightings. A fragment the writer's sender capture did
    /// not see has no sending time: not measured, counted.
    #[test]
    fn fragments_the_sender_did_not_see_are_counted() {
        let mut c = correlator(0, AppTruth::default());
        let mut rows = vec![];
        c.push(0, Item::Sample(rec("pc1", 1, 100 * MS, 101 * MS, true, 0)), &mut |r| rows.push(r));
        c.push(1, Item::Sample(rec("pc2", 1, 102 * MS, 103 * MS, true, 0)), &mut |r| rows.push(r));
        c.push(1, frag(1, 99 * MS), &mut |r| rows.push(r));
        c.finish(&mut |r| rows.push(r));
        assert_eq!(c.stats.submessages_without_sender, 1);
        assert_eq!(c.stats.submessages_judged, 0);
    }

    /// Oracle: the fed sightings. Samples 1 and 2 seen at pc1 then pc2 make pc1 the writer's sender;
    /// sample 3, seen at pc2 only (pc1's capture missed it), has no sending time: no row, counted.
    #[test]
    fn samples_the_sender_did_not_see_are_counted() {
        let mut c = correlator(0, AppTruth::default());
        let mut rows = vec![];
        for sn in 1..=2 {
            c.push(0, Item::Sample(rec("pc1", sn, sn * 100 * MS, sn * 100 * MS + MS, true, 0)), &mut |r| rows.push(r));
            c.push(1, Item::Sample(rec("pc2", sn, sn * 100 * MS + 2 * MS, sn * 100 * MS + 3 * MS, true, 0)), &mut |r| rows.push(r));
            c.push(0, Item::Watermark(sn * 2_000 * MS), &mut |r| rows.push(r));
            c.push(1, Item::Watermark(sn * 2_000 * MS), &mut |r| rows.push(r));
        }
        c.push(1, Item::Sample(rec("pc2", 3, 5_000 * MS, 5_001 * MS, true, 0)), &mut |r| rows.push(r));
        c.finish(&mut |r| rows.push(r));
        assert_eq!((c.stats.samples_judged, c.stats.samples_without_sender), (3, 1));
        assert!(c.warnings().iter().any(|w| w.starts_with("1 samples were seen at other captures but not at their writer's sender")), "{:?}", c.warnings());
        assert_eq!(rows.iter().filter(|r| r.sn == 3).count(), 0);
    }

    /// Oracle: the fed sightings. A host-local sample through a router seen at pc1 twice, into the
    /// router's session and back out of it (as a sample, and as the copy record the sample tracker
    /// emits): the first sighting is kept, the second counted and warned of; a repeated sighting in
    /// the same session (or without sessions, as RTPS) is not counted.
    #[test]
    fn a_captures_second_zenoh_session_of_a_sample_is_counted() {
        let mut c = correlator(0, AppTruth::default());
        let mut rows = vec![];
        let z = |r: SampleRecord, zids| SampleRecord { zenoh_zids: Some(zids), ..r };
        c.push(0, Item::Sample(z(rec("pc1", 1, 100 * MS, 101 * MS, true, 0), (1, 9))), &mut |r| rows.push(r));
        c.push(0, Item::Sample(z(rec("pc1", 1, 100 * MS, 101 * MS, true, 0), (1, 9))), &mut |r| rows.push(r));
        c.push(0, Item::Sample(z(rec("pc1", 1, 102 * MS, 103 * MS, true, 0), (9, 2))), &mut |r| rows.push(r));
        c.push(0, Item::Sample(rec("pc1", 2, 200 * MS, 201 * MS, true, 0)), &mut |r| rows.push(r));
        c.push(0, Item::Sample(rec("pc1", 2, 200 * MS, 201 * MS, true, 0)), &mut |r| rows.push(r));
        // as the sample tracker emits the way back: a copy record (another destination), in its own session
        let copy = |r: SampleRecord| SampleRecord { closed_by: crate::samples::CLOSED_COPY, dst: Some("10.0.0.1:7447".parse().unwrap()), ..r };
        c.push(0, Item::Sample(z(rec("pc1", 3, 300 * MS, 301 * MS, true, 0), (1, 9))), &mut |r| rows.push(r));
        c.push(0, Item::Sample(copy(z(rec("pc1", 3, 302 * MS, 303 * MS, true, 0), (9, 2)))), &mut |r| rows.push(r));
        c.push(0, Item::Sample(copy(z(rec("pc1", 3, 302 * MS, 303 * MS, true, 0), (1, 9)))), &mut |r| rows.push(r));
        c.finish(&mut |r| rows.push(r));
        assert_eq!(c.stats.zenoh_sightings_not_kept, 2);
        assert!(c.warnings().iter().any(|w| w.starts_with("2 Zenoh sightings of samples that came back out")), "{:?}", c.warnings());
    }

    /// Oracle: the fed sightings. pc2 ends and sample 1 is judged by pc1's watermark alone; pc2 runs
    /// again, its watermark behind: its sighting of sample 1 is still late (judgement had gone past it),
    /// a sighting of a sample after that time is not.
    #[test]
    fn judgement_that_went_past_a_capture_that_ended_stays_past() {
        let mut c = correlator(0, AppTruth::default());
        let mut rows = vec![];
        c.push(0, Item::Sample(rec("pc1", 1, 100 * MS, 101 * MS, true, 0)), &mut |r| rows.push(r));
        c.push(1, Item::Watermark(50 * MS), &mut |r| rows.push(r));
        c.set_ended(1, true, &mut |r| rows.push(r));
        c.push(0, Item::Watermark(3_000 * MS), &mut |r| rows.push(r));
        assert_eq!(c.pending().0, 0, "sample 1 judged without pc2");
        c.set_ended(1, false, &mut |r| rows.push(r));
        assert!(c.is_late(1, &Item::Sample(rec("pc2", 1, 102 * MS, 103 * MS, true, 0))));
        assert!(!c.is_late(1, &Item::Sample(rec("pc2", 2, 2_500 * MS, 2_501 * MS, true, 0))));
    }
}
