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
use crate::record::Value;
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
    pub source_ts: i64,
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
}

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
            stats: ChainStats::default(),
            cfg,
        }
    }

    pub fn add_hop(&mut self, h: Hop) {
        self.stats.hops += 1;
        if let Some(c) = h.cause {
            // The callback of take `c` published what this hop delivered: that hop continues.
            self.caused.insert(c, (), &mut |_, _| {});
        }
        let id = h.take;
        let take_ts = h.take_ts;
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
        let Some(last) = self.hops.get(&id) else { return };
        if last.topic.as_deref() != path.last().map(String::as_str) {
            return;
        }
        // Walk the path backwards: the direct cause when it is on the path's previous topic,
        // else the node's latest take of that topic when the publish's callback started.
        let mut inst: Vec<Hop> = vec![last.clone()];
        let mut via_latest = false;
        for want in path[..k - 1].iter().rev() {
            let cur = inst.last().expect("one hop at least");
            let direct = cur.cause.and_then(|c| self.hops.get(&c)).filter(|h| h.topic.as_deref() == Some(want.as_str()));
            let prev = match direct {
                Some(h) => Some(h),
                None => {
                    let latest = cur.inputs.iter().find(|(t, _)| &**t == want.as_str()).and_then(|(_, tk)| self.hops.get(tk));
                    if latest.is_some() {
                        via_latest = true;
                    }
                    latest
                }
            };
            match prev {
                Some(h) => inst.push(h.clone()),
                None => return,
            }
        }
        inst.reverse();
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
    source_ts_ns: I64 => Value::I(h.source_ts),
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
