//! End-to-end chains (CARET's paths; the thesis's sensor → actuator latency).
//!
//! A hop is one sample from its publish to one subscription's callback: a
//! wire sample joined to both hosts' traces, or a same-host delivery joined
//! trace to trace. A publish made inside a subscription callback (same
//! thread, between callback_start and callback_end) names the take of that
//! callback as its cause, so hops link up: the hop that delivered the input
//! to a node and the hop of the output the node published in response.
//!
//! A hop is evaluated `3 × window` after its callback started (every hop
//! upstream of it has been joined by then): walking its causes back gives
//! the topic sequence that ends in it. `--path auto` counts the maximal
//! sequences (hops whose callback published nothing that a traced
//! subscription took); `--path /a,/b,/c` measures every instance of that
//! sequence: end-to-end latency = first topic's rclcpp_publish → last
//! topic's callback_start, and per hop its layers plus `node` (callback_start
//! of a hop → rclcpp_publish of the next: the relay node's own time).
//! Σ hop ros_e2e + Σ node = end-to-end.
//!
//! A node that does not publish from the callback of its input but keeps the
//! latest input and publishes from another callback (a timer, or a callback
//! of another topic: CARET's "variable passing") is followed by `--path`
//! only: the publish's callback started with the node's latest take of the
//! path's previous topic, and that take is the hop before (the instance is
//! counted in `instances_via_latest`). `--path auto` lists only direct causes.
//!
//! Bounded: hops are kept `6 × window` (capped, least recent first, counted),
//! paths are capped.

use super::join::{Delivery, Join, TakeId};
use smallvec::SmallVec;
use crate::bounded::BoundedMap;
use crate::latency::stats::{Dist, DistSummary};
use crate::latency::layers::{layer_group, Layer, Stack, StackPart, ROS_STACK_LAYERS};
use crate::record::{opt_i, Value};
use ddscope_wire::Guid;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// The per-hop layers, in `Layer` terms.
pub const HOP_LAYERS: [Layer; 10] = [
    Layer::RosE2e,
    Layer::RosPublish,
    Layer::DdsSend,
    Layer::Message,
    Layer::DdsReceive,
    Layer::DdsLocal,
    Layer::DdsRemote,
    Layer::Executor,
    Layer::Callback,
    Layer::Node,
];

/// One joined delivery: a publish and the callback that took it.
#[derive(Debug, Clone)]
pub struct Hop {
    pub take: TakeId,
    pub cause: Option<TakeId>,
    pub topic: Option<Arc<str>>,
    pub level: Delivery,
    pub join: Join,
    pub sender: Arc<str>,
    pub receiver: Arc<str>,
    pub sender_node: Option<Arc<str>>,
    pub receiver_node: Option<Arc<str>>,
    pub writer: Option<Guid>,
    pub sn: Option<i64>,
    /// The sample's source timestamp (the take's, the publish's, or the wire's), when one is known
    /// (rmw_zenoh_cpp's host-local deliveries: none).
    pub source_ts: Option<i64>,
    pub rclcpp_ts: Option<i64>,
    pub take_ts: i64,
    pub callback_start_ts: Option<i64>,
    /// ros_publish, dds_send, message, dds_receive, dds_local, executor, callback, ros_e2e.
    pub layers: HopLayers,
    /// The latest take of each topic the publishing node had when the publish's callback started.
    pub inputs: SmallVec<[(Arc<str>, TakeId); 2]>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct HopLayers {
    pub ros_publish: Option<i64>,
    pub dds_send: Option<i64>,
    pub message: Option<i64>,
    pub dds_receive: Option<i64>,
    pub dds_local: Option<i64>,
    pub dds_remote: Option<i64>,
    pub executor: Option<i64>,
    pub callback: Option<i64>,
    pub ros_e2e: Option<i64>,
}

impl HopLayers {
    pub fn get(&self, l: Layer) -> Option<i64> {
        match l {
            Layer::RosPublish => self.ros_publish,
            Layer::DdsSend => self.dds_send,
            Layer::Message => self.message,
            Layer::DdsReceive => self.dds_receive,
            Layer::DdsLocal => self.dds_local,
            Layer::DdsRemote => self.dds_remote,
            Layer::Executor => self.executor,
            Layer::Callback => self.callback,
            Layer::RosE2e => self.ros_e2e,
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ChainConfig {
    /// The topic sequence to measure (`--path /a,/b,/c`), if any.
    pub path: Option<Vec<String>>,
    pub window_ns: i64,
    pub max_hops: usize,
    pub max_paths: usize,
    /// Emit one [`ChainRow`] per hop of every instance.
    pub rows: bool,
}

impl Default for ChainConfig {
    fn default() -> Self {
        ChainConfig { path: None, window_ns: crate::window::Window::DEFAULT.ns(), max_hops: 1 << 18, max_paths: 1024, rows: false }
    }
}

/// Statistics of one hop position of the measured chain.
#[derive(Default, Clone)]
pub struct HopStats {
    pub topic: String,
    /// (sender → receiver) pairs seen at this position, with counts.
    pub routes: BTreeMap<(String, String), u64>,
    pub levels: BTreeMap<Delivery, u64>,
    pub layers: BTreeMap<Layer, Dist>,
}

/// Counters of the chain tracking.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChainStats {
    pub hops: u64,
    pub hops_evicted: u64,
    /// Instances of the measured path.
    pub instances: u64,
    /// Instances lacking an instant (a publish through rcl only, a callback not traced): no end-to-end value.
    pub instances_incomplete: u64,
    /// Instances with a hop linked through the node's latest input (not a publish inside the input's callback).
    pub instances_via_latest: u64,
    pub paths_evicted: u64,
    /// Samples of the measured path's first topic taken by a node that continues the path (its
    /// inputs), and of those: the ones that reached the path's end, the ones dropped along the
    /// path (a later sample went on from where this one stopped) and the ones the trace ended on.
    pub inputs: u64,
    pub inputs_complete: u64,
    pub inputs_dropped: u64,
    pub inputs_unfinished: u64,
}

/// A topic sequence found by `--path auto`.
#[derive(Debug, Clone, Serialize)]
pub struct PathSummary {
    pub topics: Vec<String>,
    pub count: u64,
    pub e2e: DistSummary,
}

/// One hop position of the measured chain, summarised.
#[derive(Debug, Clone, Serialize)]
pub struct ChainHopSummary {
    pub hop: usize,
    pub topic: String,
    pub routes: Vec<(String, String, u64)>,
    /// How the hop's samples were delivered, with counts (in the order of their names).
    pub levels: Vec<(Delivery, u64)>,
    pub layers: Vec<(Layer, DistSummary)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChainSummary {
    pub path: Vec<String>,
    pub instances: u64,
    pub incomplete: u64,
    pub e2e: DistSummary,
    pub hops: Vec<ChainHopSummary>,
    /// The path's inputs (samples of its first topic taken by a node that continues the path)
    /// and what became of them: reached the end, dropped along the path, cut by the trace's end.
    pub inputs: u64,
    pub inputs_complete: u64,
    pub dropped: u64,
    pub unfinished: u64,
    /// Where the dropped inputs stopped: at hop `hop` no publish of `topic` went on from them.
    pub dropped_at: Vec<DroppedAt>,
}

/// Inputs of the measured path that stopped before hop `hop`: the node that took the previous
/// topic published nothing of `topic` from them (a later input went on instead).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DroppedAt {
    pub hop: usize,
    pub topic: String,
    pub inputs: u64,
}

/// A sample of the measured path's first topic, followed until its descendants are all evaluated.
#[derive(Debug, Clone)]
struct Start {
    host: Arc<str>,
    node: Option<Arc<str>>,
    /// The deepest path position it reached, and that hop's take.
    depth: usize,
    deepest_ts: i64,
    take_ts: i64,
}

/// Topics whose subscriptions belong to rclcpp itself (`TimeSource`'s parameter-event callback):
/// they pass nothing on to the node's publishing callbacks.
const LIBRARY_TOPICS: [&str; 1] = ["/parameter_events"];

pub struct ChainTracker {
    cfg: ChainConfig,
    hops: BoundedMap<TakeId, Hop>,
    due: VecDeque<(TakeId, i64)>,
    /// Takes whose callback published something (hops that continue).
    caused: BoundedMap<TakeId, ()>,
    paths: BoundedMap<Vec<Arc<str>>, (u64, Dist)>,
    chain_e2e: Dist,
    chain_hops: Vec<HopStats>,
    rows: Vec<ChainRow>,
    path_name: Arc<str>,
    /// (host, node, input topic, output topic): nodes seen publishing the output inside the
    /// callback of the input (a relay): their other publishes of the output are not caused by it.
    relays: BoundedMap<(Arc<str>, Option<Arc<str>>, Arc<str>, Arc<str>), ()>,
    /// The measured path's inputs still followed (by the take of the first topic).
    starts: BoundedMap<TakeId, Start>,
    /// (host, node) of first-topic takes that went on along the path.
    continuing: BoundedMap<(Arc<str>, Option<Arc<str>>), ()>,
    /// Per path position `i` ≥ 1, the latest take at position `i − 1` that went on to position `i`
    /// (an input stopped at `i − 1` before that take was dropped there: a later one went on).
    went_on_ts: Vec<i64>,
    dropped_at: Vec<u64>,
    pub stats: ChainStats,
}

impl ChainTracker {
    pub fn new(cfg: ChainConfig) -> ChainTracker {
        let chain_hops = cfg.path.as_ref().map(|p| p.iter().map(|t| HopStats { topic: t.clone(), ..Default::default() }).collect()).unwrap_or_default();
        let path_name = Arc::from(cfg.path.as_ref().map(|p| p.join(",")).unwrap_or_default());
        ChainTracker {
            hops: BoundedMap::new(cfg.max_hops),
            due: VecDeque::new(),
            caused: BoundedMap::new(cfg.max_hops),
            paths: BoundedMap::new(cfg.max_paths),
            chain_e2e: Dist::default(),
            chain_hops,
            rows: vec![],
            path_name,
            relays: BoundedMap::new(cfg.max_paths.max(1024)),
            starts: BoundedMap::new(cfg.max_hops),
            continuing: BoundedMap::new(1024),
            went_on_ts: vec![i64::MIN; cfg.path.as_ref().map_or(0, |p| p.len())],
            dropped_at: vec![0; cfg.path.as_ref().map_or(0, |p| p.len())],
            stats: ChainStats::default(),
            cfg,
        }
    }

    /// Learns that `h`'s publisher relays its cause's topic to `h`'s topic (a publish inside the input's callback).
    fn note_relay(&mut self, h: &Hop) {
        let Some(c) = h.cause else { return };
        let (Some(cause_topic), Some(topic)) = (self.hops.get(&c).and_then(|x| x.topic.clone()), h.topic.clone()) else { return };
        let key = (h.sender.clone(), h.sender_node.clone(), cause_topic, topic);
        if !self.relays.contains_key(&key) {
            self.relays.insert(key, (), &mut |_, _| {});
        }
    }

    /// Whether `cur`'s publish may have passed on the node's latest take of `want` (CARET's variable
    /// passing): not when the node relays `want` to `cur`'s topic inside `want`'s callback (its
    /// other publishes of that topic — a timer's — did not come from `want`), nor from rclcpp's
    /// own subscriptions (`/parameter_events`).
    fn passes_latest(&self, cur: &Hop, want: &str) -> bool {
        if LIBRARY_TOPICS.contains(&want) {
            return false;
        }
        let Some(topic) = cur.topic.clone() else { return false };
        !self.relays.contains_key(&(cur.sender.clone(), cur.sender_node.clone(), Arc::from(want), topic))
    }

    /// The measured path's hops from its first topic to `last`, taken at path position `at`:
    /// each hop's direct cause when it is on the previous topic, else the node's latest take of
    /// that topic when the publish's callback started (where the node may pass it on). With
    /// whether a hop came through a latest input.
    fn walk_path(&self, last: &Hop, at: usize) -> Option<(Vec<Hop>, bool)> {
        let path = self.cfg.path.as_ref()?;
        let mut inst: Vec<Hop> = vec![last.clone()];
        let mut via_latest = false;
        for want in path[..at].iter().rev() {
            let cur = inst.last().expect("one hop at least");
            let direct = cur.cause.and_then(|c| self.hops.get(&c)).filter(|h| h.topic.as_deref() == Some(want.as_str()));
            let prev = match direct {
                Some(h) => Some(h),
                None if self.passes_latest(cur, want) => {
                    let latest = cur.inputs.iter().find(|(t, _)| &**t == want.as_str()).and_then(|(_, tk)| self.hops.get(tk));
                    if latest.is_some() {
                        via_latest = true;
                    }
                    latest
                }
                None => None,
            };
            inst.push(prev?.clone());
        }
        inst.reverse();
        Some((inst, via_latest))
    }

    /// An input whose descendants have all been evaluated: counted by what became of it.
    fn finish_start(&mut self, s: Start) {
        let k = self.went_on_ts.len();
        if k == 0 || !self.continuing.contains_key(&(s.host.clone(), s.node.clone())) {
            return;
        }
        self.stats.inputs += 1;
        if s.depth + 1 >= k {
            self.stats.inputs_complete += 1;
        } else if self.went_on_ts[s.depth + 1] > s.deepest_ts {
            // A later take where this input stopped went on: this one was dropped there
            // (overwritten before the node published from it, or not published from).
            self.stats.inputs_dropped += 1;
            self.dropped_at[s.depth + 1] += 1;
        } else {
            self.stats.inputs_unfinished += 1;
        }
    }

    pub fn add_hop(&mut self, h: Hop) {
        self.stats.hops += 1;
        if let Some(c) = h.cause {
            // The callback of take `c` published what this hop delivered: that hop continues.
            self.caused.insert(c, (), &mut |_, _| {});
        }
        self.note_relay(&h);
        let id = h.take;
        let take_ts = h.take_ts;
        if self.cfg.path.as_ref().is_some_and(|p| p.first().map(String::as_str) == h.topic.as_deref()) {
            let s = Start { host: h.receiver.clone(), node: h.receiver_node.clone(), depth: 0, deepest_ts: take_ts, take_ts };
            let mut gone = vec![];
            self.starts.insert(id, s, &mut |_, s| gone.push(s));
            for s in gone {
                self.finish_start(s);
            }
        }
        let ev = &mut self.stats.hops_evicted;
        self.hops.insert(id, h, &mut |_, _| *ev += 1);
        self.due.push_back((id, take_ts.saturating_add(crate::window::chain_wait_ns(self.cfg.window_ns))));
        if self.due.len() > self.cfg.max_hops {
            self.due.pop_front();
        }
    }

    /// Evaluates hops due at `lw` and forgets hops older than 6 windows.
    pub fn advance(&mut self, lw: i64) {
        while self.due.front().is_some_and(|(_, d)| *d <= lw) {
            if let Some((id, _)) = self.due.pop_front() {
                self.evaluate(id);
            }
        }
        let keep = lw.saturating_sub(crate::window::chain_keep_ns(self.cfg.window_ns));
        while self.hops.peek_lru().is_some_and(|(_, h)| h.take_ts <= keep) {
            self.hops.pop_lru();
        }
        // Inputs whose descendants were all evaluated (3 windows after them) are counted.
        while self.starts.peek_lru().is_some_and(|(_, s)| s.take_ts <= keep) {
            if let Some((_, s)) = self.starts.pop_lru() {
                self.finish_start(s);
            }
        }
        while self.caused.len() > self.hops.len().max(1024) {
            self.caused.pop_lru();
        }
    }

    fn walk(&self, id: TakeId) -> Vec<&Hop> {
        let mut v = vec![];
        let mut cur = self.hops.get(&id);
        while let Some(h) = cur {
            if v.len() >= 64 {
                break;
            }
            v.push(h);
            cur = h.cause.and_then(|c| self.hops.get(&c));
        }
        v.reverse();
        v
    }

    fn evaluate(&mut self, id: TakeId) {
        let chain: Vec<Hop> = self.walk(id).into_iter().cloned().collect();
        if chain.is_empty() {
            return;
        }
        let e2e = |hs: &[Hop]| -> Option<i64> {
            let first = hs.first()?.rclcpp_ts?;
            Some(hs.last()?.callback_start_ts?.saturating_sub(first))
        };
        if chain.len() >= 2 && !self.caused.contains_key(&id) {
            let topics: Vec<Arc<str>> = chain.iter().map(|h| h.topic.clone().unwrap_or_else(|| Arc::from("?"))).collect();
            let ev = &mut self.stats.paths_evicted;
            let entry = self.paths.get_or_insert_with(topics, || (0, Dist::default()), &mut |_, _| *ev += 1);
            entry.0 += 1;
            if let Some(v) = e2e(&chain) {
                entry.1.record(v);
            }
        }
        let Some(path) = self.cfg.path.as_ref() else { return };
        let k = path.len();
        let Some(last) = self.hops.get(&id).cloned() else { return };
        // Every position of the path this hop's topic holds: how far the inputs went.
        let positions: SmallVec<[usize; 2]> = path.iter().enumerate().skip(1).filter(|(_, t)| last.topic.as_deref() == Some(t.as_str())).map(|(i, _)| i).collect();
        let mut instance = None;
        for i in positions {
            let Some((inst, via)) = self.walk_path(&last, i) else { continue };
            let first = &inst[0];
            if let Some(s) = self.starts.get_mut(&first.take) {
                if i > s.depth {
                    s.depth = i;
                    s.deepest_ts = last.take_ts;
                }
            }
            let node = (first.receiver.clone(), first.receiver_node.clone());
            if !self.continuing.contains_key(&node) {
                self.continuing.insert(node, (), &mut |_, _| {});
            }
            self.went_on_ts[i] = self.went_on_ts[i].max(inst[i - 1].take_ts);
            if i == k - 1 {
                instance = Some((inst, via));
            }
        }
        // Walk the path backwards: the direct cause when it is on the path's previous topic,
        // else the node's latest take of that topic when the publish's callback started.
        let Some((inst, via_latest)) = instance else { return };
        if via_latest {
            self.stats.instances_via_latest += 1;
        }
        self.stats.instances += 1;
        let total = e2e(&inst);
        match total {
            Some(v) => self.chain_e2e.record(v),
            None => self.stats.instances_incomplete += 1,
        }
        let inst = &inst[..];
        let start = inst[0].rclcpp_ts;
        let instance = self.stats.instances;
        for (i, h) in inst.iter().enumerate() {
            let node = inst.get(i + 1).and_then(|n| Some(n.rclcpp_ts?.saturating_sub(h.callback_start_ts?)));
            let hs = &mut self.chain_hops[i];
            *hs.routes.entry((h.sender.to_string(), h.receiver.to_string())).or_default() += 1;
            *hs.levels.entry(h.level).or_default() += 1;
            for l in HOP_LAYERS {
                let v = if l == Layer::Node { node } else { h.layers.get(l) };
                if let Some(v) = v {
                    hs.layers.entry(l).or_default().record(v);
                }
            }
            if self.cfg.rows {
                self.rows.push(ChainRow { chain: self.path_name.clone(), instance, hop: i as u32, h: h.clone(), node_ns: node, chain_start_ts_ns: start, chain_e2e_ns: total });
            }
        }
    }

    /// Finishes every hop still waiting (end of input).
    pub fn finish(&mut self) {
        self.advance(i64::MAX);
    }

    /// Rows of chain instances evaluated so far (drained).
    pub fn take_rows(&mut self) -> Vec<ChainRow> {
        std::mem::take(&mut self.rows)
    }

    /// The topic sequences found, most frequent first.
    pub fn paths(&self) -> Vec<PathSummary> {
        let mut v: Vec<PathSummary> = self
            .paths
            .iter()
            .map(|(t, (n, d))| PathSummary { topics: t.iter().map(|s| s.to_string()).collect(), count: *n, e2e: d.summary() })
            .collect();
        v.sort_by(|a, b| b.count.cmp(&a.count).then(a.topics.cmp(&b.topics)));
        v
    }

    /// The measured chain, if a path was given.
    pub fn summary(&self) -> Option<ChainSummary> {
        let path = self.cfg.path.as_ref()?;
        Some(ChainSummary {
            path: path.clone(),
            instances: self.stats.instances,
            incomplete: self.stats.instances_incomplete,
            inputs: self.stats.inputs,
            inputs_complete: self.stats.inputs_complete,
            dropped: self.stats.inputs_dropped,
            unfinished: self.stats.inputs_unfinished,
            dropped_at: self
                .dropped_at
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| DroppedAt { hop: i, topic: path[i].clone(), inputs: *n })
                .collect(),
            e2e: self.chain_e2e.summary(),
            hops: self
                .chain_hops
                .iter()
                .enumerate()
                .map(|(i, h)| ChainHopSummary {
                    hop: i,
                    topic: h.topic.clone(),
                    routes: h.routes.iter().map(|((s, r), n)| (s.clone(), r.clone(), *n)).collect(),
                    levels: {
                        let mut v: Vec<(Delivery, u64)> = h.levels.iter().map(|(l, n)| (*l, *n)).collect();
                        v.sort_by_key(|(l, _)| l.as_str());
                        v
                    },
                    layers: h.layers.iter().filter(|(_, d)| d.count() > 0).map(|(l, d)| (*l, d.summary())).collect(),
                })
                .collect(),
        })
    }

    /// Box-plot statistics of the measured chain (end-to-end and per hop and layer), for the report.
    pub fn boxes(&self) -> Option<(crate::latency::stats::BoxStats, Vec<Vec<(Layer, crate::latency::stats::BoxStats)>>)> {
        self.cfg.path.as_ref()?;
        Some((
            self.chain_e2e.box_stats(),
            self.chain_hops.iter().map(|h| h.layers.iter().filter(|(_, d)| d.count() > 0).map(|(l, d)| (*l, d.box_stats())).collect()).collect(),
        ))
    }
}

/// One hop of one instance of the measured chain.
#[derive(Debug, Clone)]
pub struct ChainRow {
    pub chain: Arc<str>,
    pub instance: u64,
    pub hop: u32,
    pub h: Hop,
    /// callback_start of this hop → rclcpp_publish of the next (the node's own time); none at the last hop.
    pub node_ns: Option<i64>,
    pub chain_start_ts_ns: Option<i64>,
    pub chain_e2e_ns: Option<i64>,
}

/// An optional shared string as a value.
fn os(v: &Option<Arc<str>>) -> Value<'_> {
    v.as_deref().map_or(Value::Null, Value::S)
}

crate::record!(ChainRow, r, let { let oi = |v: Option<i64>| v.map_or(Value::Null, Value::I); let h = &r.h; }, {
    chain: Str => Value::S(&r.chain),
    instance: U64 => Value::U(r.instance),
    hop: U64 => Value::U(r.hop as u64),
    topic_name: Str => os(&h.topic),
    delivery: Str => Value::S(h.level.as_str()),
    join: Str => Value::S(h.join.as_str()),
    sender: Str => Value::S(&h.sender),
    receiver: Str => Value::S(&h.receiver),
    sender_node: Str => os(&h.sender_node),
    receiver_node: Str => os(&h.receiver_node),
    writer_id: Str => h.writer.map_or(Value::Null, Value::Guid),
    sn: I64 => oi(h.sn),
    source_ts_ns: I64 => opt_i(h.source_ts),
    rclcpp_publish_ts_ns: I64 => oi(h.rclcpp_ts),
    callback_start_ts_ns: I64 => oi(h.callback_start_ts),
    ros_publish_ns: I64 => oi(h.layers.ros_publish),
    dds_send_ns: I64 => oi(h.layers.dds_send),
    message_ns: I64 => oi(h.layers.message),
    dds_receive_ns: I64 => oi(h.layers.dds_receive),
    dds_local_ns: I64 => oi(h.layers.dds_local),
    dds_remote_ns: I64 => oi(h.layers.dds_remote),
    executor_ns: I64 => oi(h.layers.executor),
    callback_ns: I64 => oi(h.layers.callback),
    ros_e2e_ns: I64 => oi(h.layers.ros_e2e),
    node_ns: I64 => oi(r.node_ns),
    chain_start_ts_ns: I64 => oi(r.chain_start_ts_ns),
    chain_e2e_ns: I64 => oi(r.chain_e2e_ns),
});

/// One line of the chain table: a hop's layer (or the chain's end-to-end).
#[derive(Debug, Clone)]
pub struct ChainLayerRow {
    pub chain: String,
    /// `e2e` or the hop number.
    pub hop: String,
    pub topic: String,
    pub route: String,
    /// The hop's layer; `None` for the chain's end-to-end (`chain_e2e`).
    pub layer: Option<Layer>,
    pub s: DistSummary,
}

crate::record!(ChainLayerRow, r, {
    chain: Str => Value::S(&r.chain),
    hop: Str => Value::S(&r.hop),
    topic: Str => Value::S(&r.topic),
    route: Str => Value::S(&r.route),
    layer: Str => Value::S(r.layer.map_or("chain_e2e", Layer::as_str)),
    count: U64 => Value::U(r.s.count),
    mean_ms: F64 => Value::F(r.s.mean_ms),
    std_ms: F64 => Value::F(r.s.std_ms),
    min_ms: F64 => Value::F(r.s.min_ms),
    p50_ms: F64 => Value::F(r.s.p50_ms),
    p90_ms: F64 => Value::F(r.s.p90_ms),
    p99_ms: F64 => Value::F(r.s.p99_ms),
    max_ms: F64 => Value::F(r.s.max_ms),
});

impl ChainSummary {
    /// The chain's end-to-end latency as a stacked bar: per hop its layers up to
    /// callback_start (ros_publish, dds_send | dds_local, message, dds_receive,
    /// executor), then the relay node's own time (`node`) before the next hop.
    pub fn stack(&self) -> Stack {
        let mut parts = vec![];
        for h in &self.hops {
            let get = |l: Layer| h.layers.iter().find(|(n, _)| *n == l).map(|(_, s)| *s);
            for l in ROS_STACK_LAYERS.iter().copied().chain([Layer::Node]) {
                if let Some(s) = get(l) {
                    parts.push(StackPart { hop: Some(h.hop), topic: Some(h.topic.clone()), layer: l.as_str().to_string(), group: layer_group(l), count: s.count, mean_ms: s.mean_ms });
                }
            }
        }
        let adds_up = self.e2e.count > 0 && self.incomplete == 0 && parts.iter().all(|p| p.count == self.e2e.count);
        Stack { total_layer: "chain_e2e".into(), total: self.e2e, parts, adds_up }
    }

    /// The chain as table lines: end-to-end first, then every hop's layers.
    pub fn layer_rows(&self) -> Vec<ChainLayerRow> {
        let chain = self.path.join(",");
        let mut v = vec![ChainLayerRow {
            chain: chain.clone(),
            hop: "e2e".into(),
            topic: format!("{} → {}", self.path.first().cloned().unwrap_or_default(), self.path.last().cloned().unwrap_or_default()),
            route: String::new(),
            layer: None,
            s: self.e2e,
        }];
        for h in &self.hops {
            let route = h.routes.iter().map(|(s, r, _)| format!("{s}→{r}")).collect::<Vec<_>>().join(" ");
            for (l, s) in &h.layers {
                v.push(ChainLayerRow { chain: chain.clone(), hop: h.hop.to_string(), topic: h.topic.clone(), route: route.clone(), layer: Some(*l), s: *s });
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// A same-host hop: `topic` published by `from` at `pub_ts`, taken by `to` at `take_ts`
    /// (callback 10 µs later), made inside the callback of take `cause` when given, with the
    /// publisher's latest takes `inputs` when its callback started.
    fn hop(id: u64, topic: &str, from: &str, to: &str, pub_ts: i64, take_ts: i64, cause: Option<u64>, inputs: &[(&str, u64)]) -> Hop {
        Hop {
            take: (0, id),
            cause: cause.map(|c| (0, c)),
            topic: Some(Arc::from(topic)),
            level: Delivery::SameHost,
            join: Join::SourceTs,
            sender: Arc::from("h"),
            receiver: Arc::from("h"),
            sender_node: Some(Arc::from(from)),
            receiver_node: Some(Arc::from(to)),
            writer: None,
            sn: Some(id as i64),
            source_ts: Some(pub_ts),
            rclcpp_ts: Some(pub_ts),
            take_ts,
            callback_start_ts: Some(take_ts + 10_000),
            layers: HopLayers { ros_e2e: Some(take_ts + 10_000 - pub_ts), ..HopLayers::default() },
            inputs: inputs.iter().map(|(t, i)| (Arc::from(*t), (0, *i))).collect(),
        }
    }

    fn tracker(path: &[&str]) -> ChainTracker {
        ChainTracker::new(ChainConfig { path: Some(path.iter().map(|s| s.to_string()).collect()), window_ns: 10 * MS, ..ChainConfig::default() })
    }

    /// ping publishes /ping from a timer and, every second /pong, from the /pong callback; pong
    /// answers every /ping. `/pong,/ping` has only the relayed /ping as instances: the timer's
    /// publishes read no /pong although the node had one (its latest input).
    #[test]
    fn timer_publishes_of_a_relayed_topic_are_not_instances() {
        let mut c = tracker(&["/pong", "/ping"]);
        let mut id = 0;
        let mut next = || {
            id += 1;
            id
        };
        let mut latest_pong: Option<u64> = None;
        let mut relayed = 0;
        for k in 0..10i64 {
            let t = k * 10 * MS;
            // the timer's /ping, with the node's latest /pong as input
            let inputs: Vec<(&str, u64)> = latest_pong.iter().map(|p| ("/pong", *p)).collect();
            let ping = next();
            c.add_hop(hop(ping, "/ping", "/ping_node", "/pong_node", t, t + MS / 10, None, &inputs));
            let pong = next();
            c.add_hop(hop(pong, "/pong", "/pong_node", "/ping_node", t + MS / 5, t + MS / 4, Some(ping), &[]));
            latest_pong = Some(pong);
            if k % 2 == 0 {
                let relay = next();
                c.add_hop(hop(relay, "/ping", "/ping_node", "/pong_node", t + MS / 2, t + MS, Some(pong), &[]));
                relayed += 1;
            }
            c.advance(t);
        }
        c.finish();
        let s = c.summary().expect("a path");
        assert_eq!(s.instances, relayed, "only the /ping published inside a /pong callback continue /pong");
        assert_eq!(c.stats.instances_via_latest, 0);
        // every /pong was taken by the node that continues the path: half went on, half did not
        assert_eq!((s.inputs, s.inputs_complete, s.dropped, s.unfinished), (10, 5, 4, 1));
        assert_eq!(s.dropped_at, vec![DroppedAt { hop: 1, topic: "/ping".into(), inputs: 4 }]);
    }

    /// A node keeping its latest input and publishing from a timer (CARET's variable passing):
    /// an input overwritten before the timer read it was dropped there; the last ones, after
    /// which nothing went on before the end, were not carried on.
    #[test]
    fn inputs_overwritten_before_a_timer_read_them_are_dropped() {
        let mut c = tracker(&["/a", "/b"]);
        let mut id = 100;
        for k in 0..20i64 {
            // /a every 5 ms; the node's timer publishes /b every 10 ms from the latest /a
            let t = k * 5 * MS;
            id += 1;
            c.add_hop(hop(id, "/a", "/src", "/mid", t, t + MS / 10, None, &[]));
            let last_a = id;
            if k % 2 == 1 && k < 17 {
                id += 1;
                c.add_hop(hop(id, "/b", "/mid", "/sink", t + 2 * MS, t + 2 * MS + MS / 10, None, &[("/a", last_a)]));
            }
            c.advance(t);
        }
        c.finish();
        let s = c.summary().expect("a path");
        // the timer read the odd inputs 1, 3, …, 15: 8 complete, the even ones before them
        // (0…14) dropped, and 16…19 after the timer's last publish not carried on
        assert_eq!((s.instances, c.stats.instances_via_latest), (8, 8));
        assert_eq!((s.inputs, s.inputs_complete, s.dropped, s.unfinished), (20, 8, 8, 4));
    }
}
