//! Prometheus exposition: a thread-safe registry the agent updates from
//! events, sample records and latency rows, rendered in the text format
//! 0.0.4 and served at `/metrics` by [`MetricsServer`].
//!
//! Every per-topic series carries the labels `capture`, `topic`, `type`,
//! `traffic_type`, `vendor`, `pcp` (and `writer_id` when
//! [`RegistryConfig::per_writer`] is set). The number of label sets is capped
//! ([`RegistryConfig::max_series`]); updates for label sets beyond the cap are
//! counted in `ddscope_export_dropped_series_total` /
//! `ddscope_export_dropped_updates_total`, never silently lost.

use crate::delivery::SinkStats;
use crate::health::CaptureHealth;
use ddscope_sysstat::promtext::{self, write_header, write_value, Family, Kind};
use ddscope_core::discovery::TopicNames;
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::latency::explain::{Cause, Incident};
use ddscope_core::latency::{Layer, LatencyRow, Status, Timing};
use ddscope_core::ros2::chain::{ChainRow, HOP_LAYERS};
use crate::budget::{row_layers, row_topic, Budget, Budgets};
use ddscope_core::samples::SampleRecord;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::Guid;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};

/// Default exposition address (the OpenTelemetry Prometheus exporter's port).
pub const DEFAULT_ADDR: &str = "127.0.0.1:9464";

/// The endpoint [`Registry::render`] renders for: `/metrics` of `--export prometheus=ADDR`.
pub const DEFAULT_ENDPOINT: &str = "export";

#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// Cap on per-topic label sets.
    pub max_series: usize,
    /// Cap on (topic, sender, receiver) latency label sets.
    pub max_latency_series: usize,
    /// Add a `writer_id` label (one series per writer instead of per topic).
    pub per_writer: bool,
    /// Upper bounds of `ddscope_sample_size_bytes` buckets.
    pub sample_size_buckets: Vec<f64>,
    /// Upper bounds of `ddscope_latency_seconds` buckets (also the chains' and jitter's).
    pub latency_buckets: Vec<f64>,
    /// Latency budgets per topic and layer: `ddscope_latency_budget_seconds` and
    /// `ddscope_latency_over_budget_total` (`serve --budget`).
    pub budgets: Vec<Budget>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            max_series: 5000,
            max_latency_series: 2000,
            per_writer: false,
            // 64 B … 16 MiB in powers of four.
            sample_size_buckets: (0..10).map(|i| 64.0 * 4f64.powi(i)).collect(),
            // 1 µs … 10 s: 1-2.5-5 steps (the ROS 2 layers inside one host take µs).
            latency_buckets: vec![
                1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ],
            budgets: vec![],
        }
    }
}

impl RegistryConfig {
    fn validate(&self) -> Result<(), String> {
        for (name, b) in [("sample_size_buckets", &self.sample_size_buckets), ("latency_buckets", &self.latency_buckets)] {
            if b.is_empty() || b.iter().any(|v| !v.is_finite()) || b.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!("{name} must be finite and strictly increasing"));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
struct Histogram {
    bounds: Arc<[f64]>,
    /// Per bucket (not cumulative); the last one is +Inf.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
    /// [`Inner::renders`] when it was created (see [`Inner::render`]'s zero-first rule).
    born: u64,
}

impl Histogram {
    fn new(bounds: Arc<[f64]>, born: u64) -> Self {
        let n = bounds.len() + 1;
        Histogram { bounds, counts: vec![0; n], sum: 0.0, count: 0, born }
    }

    fn observe(&mut self, v: f64) {
        let i = self.bounds.partition_point(|b| *b < v);
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    /// Renders the histogram; with `zero` every bucket, the sum and the count as 0.
    fn render_as(&self, out: &mut String, name: &str, labels: &str, zero: bool) {
        let mut cum = 0;
        for (i, c) in self.counts.iter().enumerate() {
            if !zero {
                cum += c;
            }
            out.push_str(name);
            out.push_str("_bucket{");
            out.push_str(labels);
            if !labels.is_empty() {
                out.push(',');
            }
            out.push_str("le=\"");
            match self.bounds.get(i) {
                Some(b) => write_value(out, *b),
                None => out.push_str("+Inf"),
            }
            let _ = writeln!(out, "\"}} {cum}");
        }
        let _ = write!(out, "{name}_sum{{{labels}}} ");
        write_value(out, if zero { 0.0 } else { self.sum });
        let _ = writeln!(out, "\n{name}_count{{{labels}}} {}", if zero { 0 } else { self.count });
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        self.render_as(out, name, labels, false)
    }
}

/// Identity of a per-topic series.
#[derive(Clone)]
struct SeriesKey {
    capture: Arc<str>,
    topic: Option<Arc<TopicNames>>,
    traffic: TrafficType,
    vendor: u16,
    pcp: Option<u8>,
    writer: Option<Guid>,
}

impl SeriesKey {
    fn names(&self) -> (&str, &str) {
        self.topic.as_deref().map_or(("", ""), |t| (t.topic_name.as_str(), t.type_name.as_str()))
    }
    fn domain(&self) -> Option<u32> {
        self.topic.as_deref().and_then(|t| t.domain)
    }
}

impl PartialEq for SeriesKey {
    fn eq(&self, o: &Self) -> bool {
        self.capture == o.capture
            && self.names() == o.names()
            && self.domain() == o.domain()
            && self.traffic == o.traffic
            && self.vendor == o.vendor
            && self.pcp == o.pcp
            && self.writer == o.writer
    }
}
impl Eq for SeriesKey {}
impl Hash for SeriesKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.capture.hash(h);
        self.names().hash(h);
        self.domain().hash(h);
        self.traffic.hash(h);
        self.vendor.hash(h);
        self.pcp.hash(h);
        self.writer.hash(h);
    }
}

const KINDS: [SubmsgKind; 18] = [
    SubmsgKind::Pad,
    SubmsgKind::AckNack,
    SubmsgKind::Heartbeat,
    SubmsgKind::Gap,
    SubmsgKind::InfoTs,
    SubmsgKind::InfoSrc,
    SubmsgKind::InfoReplyIp4,
    SubmsgKind::InfoDst,
    SubmsgKind::InfoReply,
    SubmsgKind::NackFrag,
    SubmsgKind::HeartbeatFrag,
    SubmsgKind::Data,
    SubmsgKind::DataFrag,
    SubmsgKind::SecBody,
    SubmsgKind::SecPrefix,
    SubmsgKind::SecPostfix,
    SubmsgKind::SrtpsPrefix,
    SubmsgKind::SrtpsPostfix,
];

fn kind_slot(k: SubmsgKind) -> Option<usize> {
    KINDS.iter().position(|x| *x == k)
}

struct TopicSeries {
    /// Rendered label pairs, without braces.
    labels: String,
    /// Traffic of a writer (not only INFO_* and friends): all counters are exposed, zeros included.
    has_writer: bool,
    submsgs: [u64; KINDS.len()],
    /// Vendor and unknown submessage ids.
    other_kinds: Vec<(SubmsgKind, u64)>,
    payload_bytes: u64,
    rtps_fragments: u64,
    heartbeats: u64,
    acknacks: u64,
    nack_frags: u64,
    gaps: u64,
    samples: u64,
    incomplete_samples: u64,
    sample_bytes: u64,
    ip_fragments: u64,
    retransmitted_fragments: u64,
    retransmitted_bytes: u64,
    sample_size: Histogram,
}

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct FlowKey {
    topic: String,
    domain: Option<u32>,
    sender: Arc<str>,
    receiver: Arc<str>,
}

/// Latency layers are exported as the `layer` label, in [`Layer::ALL`]'s order.
const NLAYERS: usize = Layer::ALL.len();
/// What became of a judged sample at a receiver: the wire's three outcomes,
/// and the ROS 2 layer's deliveries joined trace to trace.
const STATUSES: [Status; 5] = [Status::Delivered, Status::Lost, Status::Incomplete, Status::SameHost, Status::Traced];
const TIMINGS: [Timing; 2] = [Timing::InTime, Timing::Late];

fn layer_slot(l: Layer) -> usize {
    Layer::ALL.iter().position(|x| *x == l).expect("every layer is in Layer::ALL")
}

/// The series of one flow (topic, domain, sender → receiver).
struct FlowSeries {
    labels: String,
    /// Per layer, created with its first observation.
    layers: [Option<Histogram>; NLAYERS],
    negative: [u64; NLAYERS],
    over_budget: [u64; NLAYERS],
    status: [u64; STATUSES.len()],
    timing: [u64; TIMINGS.len()],
    repaired: u64,
    /// Incidents judged by `serve`'s explainer, per cause ([`Cause::ALL`]'s order).
    incidents: [u64; Cause::ALL.len()],
    /// |d(X) − d(X−1)| of consecutive samples (Bosk et al. Eq. 10), seconds.
    jitter: Option<Histogram>,
    /// [`Inner::renders`] when it was created (zero-first rule).
    born: u64,
}

/// One hop position (or the end to end) of a measured chain, between two capture points.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ChainKey {
    chain: Arc<str>,
    /// `e2e` or the hop's number (0 first).
    hop: String,
    topic: String,
    sender: String,
    receiver: String,
}

struct ChainSeries {
    labels: String,
    /// Per hop layer (and `chain_e2e` at hop `e2e`), created with the first observation.
    layers: BTreeMap<&'static str, Histogram>,
    negative: u64,
}

#[derive(Default)]
struct Overflow {
    /// Hashes of refused label sets (bounded), to count each once.
    refused: FxHashSet<u64>,
    dropped_series: u64,
    dropped_updates: u64,
}

/// Refused label sets remembered to count each once; beyond this every refusal counts.
const REFUSED_MEMORY: usize = 100_000;

impl Overflow {
    fn refuse(&mut self, h: u64) {
        self.dropped_updates += 1;
        if self.refused.len() < REFUSED_MEMORY {
            if self.refused.insert(h) {
                self.dropped_series += 1;
            }
        } else if !self.refused.contains(&h) {
            self.dropped_series += 1;
        }
    }
}

type WriterKey = (Guid, Option<u8>, u16, TrafficType);
/// Capture and topic the entry was made for, and the series index.
type WriterEntry = (Arc<str>, Option<Arc<TopicNames>>, usize);
/// Name, help and value of a per-capture or per-sink family.
type HealthMetric = (&'static str, &'static str, fn(&CaptureHealth) -> u64);
type SinkMetric = (&'static str, &'static str, Kind, fn(&SinkStats) -> u64);

struct Inner {
    cfg: RegistryConfig,
    size_bounds: Arc<[f64]>,
    lat_bounds: Arc<[f64]>,
    series: Vec<TopicSeries>,
    index: FxHashMap<SeriesKey, usize>,
    /// Fast path: (writer, pcp, vendor, traffic) → series, valid while capture and topic are the same Arcs.
    by_writer: FxHashMap<WriterKey, WriterEntry>,
    topic_overflow: Overflow,
    flows: BTreeMap<FlowKey, FlowSeries>,
    flow_overflow: Overflow,
    budgets: Budgets,
    /// Chain hop positions (and ends to end) of measured chains; capped like flows.
    chains: BTreeMap<ChainKey, ChainSeries>,
    chain_overflow: Overflow,
    /// Per measured chain: instances with and without an end-to-end value, and when created ([`Self::renders`]).
    chain_instances: BTreeMap<Arc<str>, (u64, u64, u64)>,
    /// Renders for a scrape so far, of every endpoint: the clock series are born at.
    renders: u64,
    /// Per scraped endpoint (`/metrics` of `serve`, of `--export prometheus=`), [`Self::renders`]
    /// at its latest scrape.
    scrapers: Vec<(&'static str, u64)>,
    /// Clock offsets t_o (Bosk et al. Eq. 9) in use per capture point, ns.
    clock_offsets: Vec<(String, i64)>,
    health: BTreeMap<String, CaptureHealth>,
    /// (capture, topic, role, node) of the latest topic table: `ddscope_topic_node_info`, at most `max_series`.
    topic_nodes: Vec<(String, String, &'static str, String)>,
    /// Node label sets of the latest table left out by the cap.
    topic_nodes_dropped: u64,
    /// (capture, topic, domain) → current rate of the latest live table: `ddscope_topic_rate_hz`, at most `max_series`.
    topic_rates: Vec<(String, String, String, f64)>,
    /// Families from the system sampler or a node_exporter, per source.
    system: BTreeMap<String, Vec<Family>>,
    sinks: Vec<(String, Arc<SinkStats>)>,
    /// The sample tracer's counters (`serve --export otlp=…`).
    trace_stats: Option<Arc<crate::traces::TraceStats>>,
}

/// A topic's current rate, for [`Registry::set_topic_rates`].
#[derive(Debug, Clone)]
pub struct TopicRate {
    pub capture: String,
    pub topic: String,
    pub domain: Option<u32>,
    pub rate_hz: Option<f64>,
    pub kind: ddscope_core::rate::RateKind,
}

/// The metrics of one agent. Cheap to share (`Arc<Registry>`); every method takes `&self`.
pub struct Registry {
    inner: Mutex<Inner>,
}

fn push_label(out: &mut String, k: &str, v: &str) {
    if !out.is_empty() {
        out.push(',');
    }
    out.push_str(k);
    out.push_str("=\"");
    // Values come from the wire: capped as the decoder caps names (a label of
    // a 4 MB name would make every scrape carry it).
    promtext::escape_label_value(out, &ddscope_core::names::cap_label(v));
    out.push('"');
}

fn hash_of<T: Hash>(t: &T) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    t.hash(&mut h);
    h.finish()
}

impl Inner {
    fn series_for(&mut self, capture: &Arc<str>, topic: &Option<Arc<TopicNames>>, traffic: TrafficType, vendor: u16, pcp: Option<u8>, writer: Option<Guid>) -> Option<usize> {
        if let Some(w) = writer {
            if let Some((c, t, i)) = self.by_writer.get(&(w, pcp, vendor, traffic)) {
                let same_topic = match (t, topic) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                };
                if Arc::ptr_eq(c, capture) && same_topic {
                    return Some(*i);
                }
            }
        }
        let key = SeriesKey {
            capture: capture.clone(),
            topic: topic.clone(),
            traffic,
            vendor,
            pcp,
            writer: if self.cfg.per_writer { writer } else { None },
        };
        let idx = match self.index.get(&key) {
            Some(i) => *i,
            None => {
                if self.series.len() >= self.cfg.max_series {
                    self.topic_overflow.refuse(hash_of(&key));
                    return None;
                }
                let mut labels = String::new();
                let (topic_name, type_name) = key.names();
                push_label(&mut labels, "capture", &key.capture);
                push_label(&mut labels, "topic", topic_name);
                push_label(&mut labels, "type", type_name);
                push_label(&mut labels, "domain", &key.domain().map(|d| d.to_string()).unwrap_or_default());
                push_label(&mut labels, "traffic_type", traffic.as_str());
                push_label(&mut labels, "vendor", &format!("0x{vendor:04x}"));
                push_label(&mut labels, "pcp", &pcp.map(|p| p.to_string()).unwrap_or_default());
                if let Some(w) = key.writer {
                    push_label(&mut labels, "writer_id", &w.to_string());
                }
                let i = self.series.len();
                self.series.push(TopicSeries {
                    labels,
                    has_writer: false,
                    submsgs: [0; KINDS.len()],
                    other_kinds: vec![],
                    payload_bytes: 0,
                    rtps_fragments: 0,
                    heartbeats: 0,
                    acknacks: 0,
                    nack_frags: 0,
                    gaps: 0,
                    samples: 0,
                    incomplete_samples: 0,
                    sample_bytes: 0,
                    ip_fragments: 0,
                    retransmitted_fragments: 0,
                    retransmitted_bytes: 0,
                    sample_size: Histogram::new(self.size_bounds.clone(), 0),
                });
                self.index.insert(key, i);
                i
            }
        };
        if let Some(w) = writer {
            self.series[idx].has_writer = true;
            if self.by_writer.len() < 4 * self.cfg.max_series {
                self.by_writer.insert((w, pcp, vendor, traffic), (capture.clone(), topic.clone(), idx));
            }
        }
        Some(idx)
    }

    fn on_event(&mut self, e: &SubmsgEvent) {
        let Some(i) = self.series_for(&e.capture, &e.topic, e.traffic_type, e.vendor_id, e.pcp, e.writer_id) else { return };
        let s = &mut self.series[i];
        match kind_slot(e.kind) {
            Some(k) => s.submsgs[k] += 1,
            None => match s.other_kinds.iter_mut().find(|(k, _)| *k == e.kind) {
                Some((_, n)) => *n += 1,
                None => s.other_kinds.push((e.kind, 1)),
            },
        }
        match e.kind {
            SubmsgKind::Data => s.payload_bytes += e.payload_size.unwrap_or(0) as u64,
            SubmsgKind::DataFrag => {
                s.payload_bytes += e.payload_size.unwrap_or(0) as u64;
                s.rtps_fragments += e.frags_in_submsg.unwrap_or(1) as u64;
            }
            SubmsgKind::Heartbeat | SubmsgKind::HeartbeatFrag => s.heartbeats += 1,
            SubmsgKind::AckNack => s.acknacks += 1,
            SubmsgKind::NackFrag => s.nack_frags += 1,
            SubmsgKind::Gap => s.gaps += 1,
            _ => {}
        }
    }

    fn on_sample(&mut self, r: &SampleRecord) {
        let Some(i) = self.series_for(&r.capture, &r.topic, r.traffic_type, r.vendor_id, r.pcp, Some(r.writer_id)) else { return };
        let s = &mut self.series[i];
        if r.is_supplement() {
            // Another datagram of a sample already counted (repair or copy to another reader).
            s.ip_fragments += r.ip_frags as u64;
            s.retransmitted_fragments += r.retransmitted_frags as u64;
            s.retransmitted_bytes += r.retransmitted_bytes;
            return;
        }
        s.samples += 1;
        if !r.complete {
            s.incomplete_samples += 1;
        }
        s.sample_bytes += r.sample_size as u64;
        s.ip_fragments += r.ip_frags as u64;
        s.retransmitted_fragments += r.retransmitted_frags as u64;
        s.retransmitted_bytes += r.retransmitted_bytes;
        s.sample_size.observe(r.sample_size as f64);
    }

    fn on_latency(&mut self, row: &LatencyRow) {
        let topic = row_topic(row);
        let key = FlowKey { topic, domain: row.topic.as_deref().and_then(|t| t.domain), sender: row.sender.clone(), receiver: row.receiver.clone() };
        if !self.flows.contains_key(&key) {
            if self.flows.len() >= self.cfg.max_latency_series {
                self.flow_overflow.refuse(hash_of(&key));
                return;
            }
            let mut labels = String::new();
            push_label(&mut labels, "topic", &key.topic);
            push_label(&mut labels, "domain", &key.domain.map(|d| d.to_string()).unwrap_or_default());
            push_label(&mut labels, "sender", &key.sender);
            push_label(&mut labels, "receiver", &key.receiver);
            self.flows.insert(
                key.clone(),
                FlowSeries {
                    labels,
                    layers: std::array::from_fn(|_| None),
                    negative: [0; NLAYERS],
                    over_budget: [0; NLAYERS],
                    status: [0; STATUSES.len()],
                    timing: [0; TIMINGS.len()],
                    repaired: 0,
                    incidents: [0; Cause::ALL.len()],
                    jitter: None,
                    born: self.renders,
                },
            );
        }
        let bounds = self.lat_bounds.clone();
        let budgets = &self.budgets;
        let born = self.renders;
        let f = self.flows.get_mut(&key).expect("inserted above");
        for (layer, ns) in row_layers(row) {
            let i = layer_slot(layer);
            if ns < 0 {
                // A negative observation would make _sum decrease (rate() breaks):
                // count it instead (a clock offset between the capture points).
                f.negative[i] += 1;
                continue;
            }
            f.layers[i].get_or_insert_with(|| Histogram::new(bounds.clone(), born)).observe(ns as f64 / 1e9);
            if budgets.limit(&key.topic, layer).is_some_and(|b| ns > b) {
                f.over_budget[i] += 1;
            }
        }
        if row.level == ddscope_core::latency::Level::Message {
            if let Some(i) = STATUSES.iter().position(|s| *s == row.status) {
                f.status[i] += 1;
            }
            if let Some(i) = TIMINGS.iter().position(|t| Some(*t) == row.timing) {
                f.timing[i] += 1;
            }
            if row.repaired {
                f.repaired += 1;
            }
            if let Some(j) = row.jitter_ns {
                f.jitter.get_or_insert_with(|| Histogram::new(bounds, born)).observe(j.saturating_abs() as f64 / 1e9);
            }
        }
    }

    /// Counts the incidents of a judged window on their flows' series (a flow without a series,
    /// over `max_latency_series`, is refused and counted like its rows).
    fn on_incidents(&mut self, incidents: &[Incident]) {
        for i in incidents {
            let key = FlowKey { topic: i.topic.clone(), domain: i.domain, sender: i.sender.clone(), receiver: i.receiver.clone() };
            match self.flows.get_mut(&key) {
                Some(f) => f.incidents[Cause::ALL.iter().position(|c| *c == i.cause).expect("every cause is in Cause::ALL")] += 1,
                None => self.flow_overflow.refuse(hash_of(&key)),
            }
        }
    }

    /// One hop of one instance of a measured chain: the hop's layers (and `node`,
    /// the relay's own time), and once per instance (at hop 0) its end to end.
    fn on_chain_row(&mut self, r: &ChainRow) {
        let h = &r.h;
        let topic = h.topic.as_deref().unwrap_or("").to_string();
        let mut obs: Vec<(&'static str, i64)> = HOP_LAYERS
            .iter()
            .filter_map(|l| if *l == Layer::Node { r.node_ns.map(|v| ("node", v)) } else { h.layers.get(*l).map(|v| (l.as_str(), v)) })
            .collect();
        let hop_key = ChainKey { chain: r.chain.clone(), hop: r.hop.to_string(), topic, sender: h.sender.to_string(), receiver: h.receiver.to_string() };
        self.chain_observe(hop_key, &obs);
        if r.hop == 0 {
            let e = self.chain_instances.entry(r.chain.clone()).or_insert((0, 0, self.renders));
            match r.chain_e2e_ns {
                Some(v) => {
                    e.0 += 1;
                    obs = vec![("chain_e2e", v)];
                    let key = ChainKey { chain: r.chain.clone(), hop: "e2e".into(), topic: String::new(), sender: String::new(), receiver: String::new() };
                    self.chain_observe(key, &obs);
                }
                None => e.1 += 1,
            }
        }
    }

    fn chain_observe(&mut self, key: ChainKey, obs: &[(&'static str, i64)]) {
        if !self.chains.contains_key(&key) {
            if self.chains.len() >= self.cfg.max_latency_series {
                self.chain_overflow.refuse(hash_of(&(&key.chain, &key.hop, &key.topic, &key.sender, &key.receiver)));
                return;
            }
            let mut labels = String::new();
            push_label(&mut labels, "chain", &key.chain);
            push_label(&mut labels, "hop", &key.hop);
            push_label(&mut labels, "topic", &key.topic);
            push_label(&mut labels, "sender", &key.sender);
            push_label(&mut labels, "receiver", &key.receiver);
            self.chains.insert(key.clone(), ChainSeries { labels, layers: BTreeMap::new(), negative: 0 });
        }
        let bounds = self.lat_bounds.clone();
        let born = self.renders;
        let c = self.chains.get_mut(&key).expect("inserted above");
        for (l, v) in obs {
            if *v < 0 {
                c.negative += 1;
            } else {
                c.layers.entry(l).or_insert_with(|| Histogram::new(bounds.clone(), born)).observe(*v as f64 / 1e9);
            }
        }
    }
}

impl Registry {
    pub fn new(cfg: RegistryConfig) -> Result<Self, String> {
        cfg.validate()?;
        Ok(Registry {
            inner: Mutex::new(Inner {
                size_bounds: cfg.sample_size_buckets.clone().into(),
                lat_bounds: cfg.latency_buckets.clone().into(),
                budgets: Budgets::new(&cfg.budgets),
                cfg,
                series: vec![],
                index: FxHashMap::default(),
                by_writer: FxHashMap::default(),
                topic_overflow: Overflow::default(),
                flows: BTreeMap::new(),
                flow_overflow: Overflow::default(),
                chains: BTreeMap::new(),
                chain_overflow: Overflow::default(),
                chain_instances: BTreeMap::new(),
                renders: 0,
                scrapers: vec![],
                clock_offsets: vec![],
                health: BTreeMap::new(),
                topic_nodes: vec![],
                topic_rates: vec![],
                topic_nodes_dropped: 0,
                system: BTreeMap::new(),
                sinks: vec![],
                trace_stats: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one submessage.
    pub fn on_event(&self, e: &SubmsgEvent) {
        self.lock().on_event(e);
    }

    /// Counts a batch of submessages under one lock.
    pub fn on_events<'a>(&self, es: impl IntoIterator<Item = &'a SubmsgEvent>) {
        let mut g = self.lock();
        for e in es {
            g.on_event(e);
        }
    }

    /// Counts one closed sample record (samples, sizes, IP fragments, retransmissions).
    pub fn on_sample(&self, r: &SampleRecord) {
        self.lock().on_sample(r);
    }

    /// Observes one correlated latency row.
    pub fn on_latency(&self, row: &LatencyRow) {
        self.lock().on_latency(row);
    }

    /// Counts the incidents `serve` judged in one window (`ddscope_incidents_total`).
    pub fn on_incidents(&self, incidents: &[Incident]) {
        self.lock().on_incidents(incidents);
    }

    /// Replaces the capture-health counters of `h.capture`.
    pub fn set_capture_health(&self, h: &CaptureHealth) {
        self.lock().health.insert(h.capture.clone(), h.clone());
    }

    /// Replaces the ROS node names of the topics (from the ROS graph on the wire,
    /// `ros_discovery_info`) with those of `rows` (the current topic table):
    /// `ddscope_topic_node_info{capture, topic, role="writer"|"reader", node} 1`, at most
    /// `max_series` label sets (the rest counted in `ddscope_export_dropped_series_total{kind="topic_node"}`).
    pub fn set_topic_nodes(&self, rows: &[ddscope_core::topics::TopicRow]) {
        let mut g = self.lock();
        let cap = g.cfg.max_series;
        let mut v = vec![];
        let mut dropped = 0u64;
        for r in rows {
            let Some(t) = r.names.as_deref() else { continue };
            for (role, nodes) in [("writer", &r.writer_nodes), ("reader", &r.reader_nodes)] {
                for n in nodes {
                    if v.len() >= cap {
                        dropped += 1;
                    } else {
                        v.push((r.capture.clone(), t.topic_name.clone(), role, n.clone()));
                    }
                }
            }
        }
        v.sort();
        v.dedup();
        g.topic_nodes = v;
        g.topic_nodes_dropped = dropped;
    }

    /// Replaces the topics' current rates with `rates` (the live table's, ddscope_core::rate:
    /// per writer (n − 1) / (last − first) over its samples of the last seconds, summed over
    /// the topic's steady writers): `ddscope_topic_rate_hz{capture, topic, domain}`. A topic
    /// without a rate (bursty, fewer than 5 samples) has no series; one without samples in
    /// the window is 0. At most `max_series` label sets (the rest are left out, like node info).
    pub fn set_topic_rates(&self, rates: &[TopicRate]) {
        let mut g = self.lock();
        let cap = g.cfg.max_series;
        let mut v: Vec<(String, String, String, f64)> = rates
            .iter()
            .filter_map(|r| {
                let hz = match (r.rate_hz, r.kind) {
                    (Some(hz), _) => hz,
                    (None, ddscope_core::rate::RateKind::None) => 0.0,
                    _ => return None,
                };
                Some((r.capture.clone(), r.topic.clone(), r.domain.map(|d| d.to_string()).unwrap_or_default(), hz))
            })
            .collect();
        v.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
        v.truncate(cap);
        g.topic_rates = v;
    }

    /// Replaces the system families of `source` (the sampler's or a node_exporter's).
    pub fn set_system(&self, source: &str, families: Vec<Family>) {
        self.lock().system.insert(source.to_string(), families);
    }

    /// Exposes the sample tracer's counters as `ddscope_trace_export_total{what}`.
    pub fn register_trace_stats(&self, stats: Arc<crate::traces::TraceStats>) {
        self.lock().trace_stats = Some(stats);
    }

    /// Replaces the families of another source (e.g. `serve`'s own counters), merged by name into the exposition.
    pub fn set_families(&self, source: &str, families: Vec<Family>) {
        self.set_system(source, families);
    }

    /// Exposes a push sink's counters as `ddscope_export_*{sink=name}`.
    pub fn register_sink(&self, name: &str, stats: Arc<SinkStats>) {
        let mut g = self.lock();
        g.sinks.retain(|(n, _)| n != name);
        g.sinks.push((name.to_string(), stats));
    }

    /// Label sets refused because a cap was hit: (topic series, latency series).
    pub fn dropped_series(&self) -> (u64, u64) {
        let g = self.lock();
        (g.topic_overflow.dropped_series, g.flow_overflow.dropped_series)
    }

    /// Everything as metric families (for the OTLP sink), with their current values.
    pub fn families(&self) -> Vec<Family> {
        // The text is the one representation every family has; parsing it
        // back keeps the OTLP metrics identical to what Prometheus scrapes.
        promtext::parse(&self.render_current()).unwrap_or_default()
    }

    /// The exposition in the text format 0.0.4, for a scrape of the default endpoint
    /// (see [`render_for`](Self::render_for)).
    pub fn render(&self) -> String {
        self.render_for(DEFAULT_ENDPOINT)
    }

    /// The exposition for a scrape of `endpoint`: every series with its current
    /// values, except a latency label set created since that endpoint's previous
    /// scrape, shown with zero counts this once (its observations from the next
    /// scrape on), so that rate() and increase() count the observations it was
    /// created with. Each endpoint (`serve`'s own `/metrics`, the one of
    /// `--export prometheus=`) keeps its own last scrape, so no scrape of one makes
    /// a counter of the other go down; the first scrape of an endpoint shows the
    /// values (a series is never read as 0 after it was read above 0).
    pub fn render_for(&self, endpoint: &'static str) -> String {
        let mut g = self.lock();
        let mut out = String::with_capacity(4096 + (g.series.len() + g.flows.len()) * 1024);
        g.renders += 1;
        let now = g.renders;
        let prev = g.scrapers.iter().find(|(e, _)| *e == endpoint).map(|(_, r)| *r);
        g.render(&mut out, prev);
        match g.scrapers.iter_mut().find(|(e, _)| *e == endpoint) {
            Some(s) => s.1 = now,
            None => g.scrapers.push((endpoint, now)),
        }
        out
    }

    /// The exposition with every current value (nothing marked as exposed).
    pub fn render_current(&self) -> String {
        let g = self.lock();
        let mut out = String::with_capacity(4096 + (g.series.len() + g.flows.len()) * 1024);
        g.render(&mut out, None);
        out
    }

    /// Observes one hop row of a measured chain (`ddscope_chain_latency_seconds`).
    pub fn on_chain_row(&self, r: &ChainRow) {
        self.lock().on_chain_row(r);
    }

    /// Replaces the clock offsets in use (`ddscope_clock_offset_seconds{capture}`).
    pub fn set_clock_offsets(&self, offsets: &[(String, i64)]) {
        self.lock().clock_offsets = offsets.to_vec();
    }

    /// Label sets refused because a cap was hit: chains.
    pub fn dropped_chain_series(&self) -> u64 {
        self.lock().chain_overflow.dropped_series
    }
}

type Getter = fn(&TopicSeries) -> u64;

impl Inner {
    /// `since`: the endpoint's previous scrape ([`Self::renders`]), whose later series show zeros.
    fn render(&self, out: &mut String, since: Option<u64>) {
        // Per-topic counters.
        write_header(out, "ddscope_submessages_total", "RTPS submessages seen, by kind.", Kind::Counter);
        for s in &self.series {
            for (i, n) in s.submsgs.iter().enumerate() {
                if *n > 0 {
                    let _ = writeln!(out, "ddscope_submessages_total{{{},kind=\"{}\"}} {n}", s.labels, KINDS[i].name());
                }
            }
            for (k, n) in &s.other_kinds {
                let _ = writeln!(out, "ddscope_submessages_total{{{},kind=\"{}\"}} {n}", s.labels, k.name());
            }
        }
        let counters: [(&str, &str, Getter); 12] = [
            ("ddscope_payload_bytes_total", "Serialized payload bytes of DATA and DATA_FRAG submessages on the wire, retransmissions included.", |s| s.payload_bytes),
            ("ddscope_rtps_fragments_total", "DDS fragments carried by DATA_FRAG submessages, retransmissions included.", |s| s.rtps_fragments),
            ("ddscope_heartbeats_total", "HEARTBEAT and HEARTBEAT_FRAG submessages.", |s| s.heartbeats),
            ("ddscope_acknacks_total", "ACKNACK submessages (towards the writer of the series).", |s| s.acknacks),
            ("ddscope_nack_frags_total", "NACK_FRAG submessages (towards the writer of the series).", |s| s.nack_frags),
            ("ddscope_gaps_total", "GAP submessages.", |s| s.gaps),
            ("ddscope_samples_total", "DDS samples (writer, sequence number) closed at this capture point.", |s| s.samples),
            ("ddscope_incomplete_samples_total", "Samples closed without every fragment seen.", |s| s.incomplete_samples),
            ("ddscope_sample_bytes_total", "Serialized sizes of the closed samples.", |s| s.sample_bytes),
            ("ddscope_ip_fragments_total", "IP fragments of the datagrams that carried the closed samples.", |s| s.ip_fragments),
            ("ddscope_retransmitted_fragments_total", "DDS fragments seen again towards the same destination.", |s| s.retransmitted_fragments),
            ("ddscope_retransmitted_bytes_total", "Bytes of the retransmitted fragments.", |s| s.retransmitted_bytes),
        ];
        for (name, help, get) in counters {
            write_header(out, name, help, Kind::Counter);
            for s in self.series.iter().filter(|s| s.has_writer || get(s) > 0) {
                let _ = writeln!(out, "{name}{{{}}} {}", s.labels, get(s));
            }
        }
        write_header(out, "ddscope_sample_size_bytes", "Serialized size of the closed samples.", Kind::Histogram);
        for s in self.series.iter().filter(|s| s.samples > 0) {
            s.sample_size.render(out, "ddscope_sample_size_bytes", &s.labels);
        }

        // Latency between capture points. A label set created since this endpoint's
        // previous scrape is exposed with zeros first (`since`): Prometheus takes a
        // series' first value as its start, so rate() and increase() would
        // otherwise never count the observations it was created with.
        let z = |born: u64| since.is_some_and(|p| born >= p);
        write_header(
            out,
            "ddscope_latency_seconds",
            "Latency per layer between two capture points (docs/latency.md): message (first DATA at the sender to sample complete at the receiver), first_first, last_last, submessage (per DATA_FRAG), source_ts_to_wire, the ROS 2 layers (ros_publish, dds_send, dds_receive, dds_local, dds_remote, executor, callback, ros_e2e) and the ground truth's.",
            Kind::Histogram,
        );
        for f in self.flows.values() {
            for (i, h) in f.layers.iter().enumerate() {
                if let Some(h) = h {
                    let labels = format!("{},layer=\"{}\"", f.labels, Layer::ALL[i].as_str());
                    h.render_as(out, "ddscope_latency_seconds", &labels, z(h.born));
                }
            }
        }
        write_header(out, "ddscope_latency_negative_total", "Latency observations below zero (clock offset between the capture points), not put in the histogram.", Kind::Counter);
        for f in self.flows.values() {
            for (i, n) in f.negative.iter().enumerate() {
                if *n > 0 {
                    let _ = writeln!(out, "ddscope_latency_negative_total{{{},layer=\"{}\"}} {}", f.labels, Layer::ALL[i].as_str(), if z(f.born) { 0 } else { *n });
                }
            }
        }
        write_header(
            out,
            "ddscope_latency_samples_total",
            "Samples judged between a sender and a receiver capture point, by status: delivered, lost, incomplete (the wire); same_host, traced (ROS 2 deliveries joined trace to trace).",
            Kind::Counter,
        );
        for f in self.flows.values() {
            for (i, n) in f.status.iter().enumerate() {
                let _ = writeln!(out, "ddscope_latency_samples_total{{{},status=\"{}\"}} {}", f.labels, STATUSES[i].as_str(), if z(f.born) { 0 } else { *n });
            }
        }
        write_header(out, "ddscope_latency_repaired_samples_total", "Judged samples that needed retransmitted fragments.", Kind::Counter);
        for f in self.flows.values() {
            let _ = writeln!(out, "ddscope_latency_repaired_samples_total{{{}}} {}", f.labels, if z(f.born) { 0 } else { f.repaired });
        }
        write_header(
            out,
            "ddscope_latency_timing_total",
            "Delivered samples in time or late against the writer's publication period (Kouril et al.; the period inferred from the interval between the sender's samples per sequence number).",
            Kind::Counter,
        );
        for f in self.flows.values() {
            for (i, n) in f.timing.iter().enumerate() {
                let _ = writeln!(out, "ddscope_latency_timing_total{{{},timing=\"{}\"}} {}", f.labels, TIMINGS[i].as_str(), if z(f.born) { 0 } else { *n });
            }
        }
        write_header(
            out,
            "ddscope_incidents_total",
            "Samples serve judged incidents (over budget, lost, late, outliers, impossible layers), by the cause the evidence supports (docs/latency.md, \"Why was it late\"); counted when their window of sample time is judged.",
            Kind::Counter,
        );
        for f in self.flows.values() {
            for (i, n) in f.incidents.iter().enumerate() {
                let _ = writeln!(out, "ddscope_incidents_total{{{},cause=\"{}\"}} {}", f.labels, Cause::ALL[i].name(), if z(f.born) { 0 } else { *n });
            }
        }
        write_header(out, "ddscope_latency_jitter_seconds", "Jitter |d(X) - d(X-1)| of the message latency of consecutive samples (Bosk et al. Eq. 10).", Kind::Histogram);
        for f in self.flows.values() {
            if let Some(h) = &f.jitter {
                h.render_as(out, "ddscope_latency_jitter_seconds", &f.labels, z(h.born));
            }
        }
        if !self.budgets.is_empty() {
            write_header(out, "ddscope_latency_budget_seconds", "Latency budget per topic and layer (serve --budget; topic \"*\" for every topic without its own).", Kind::Gauge);
            for b in self.budgets.list() {
                let mut l = String::new();
                push_label(&mut l, "topic", &b.topic);
                push_label(&mut l, "layer", b.layer.as_str());
                let _ = write!(out, "ddscope_latency_budget_seconds{{{l}}} ");
                write_value(out, b.limit_ns as f64 / 1e9);
                out.push('\n');
            }
            write_header(out, "ddscope_latency_over_budget_total", "Observations over their topic's budget at that layer.", Kind::Counter);
            for (k, f) in &self.flows {
                for (i, n) in f.over_budget.iter().enumerate() {
                    if f.layers[i].is_some() && self.budgets.limit(&k.topic, Layer::ALL[i]).is_some() {
                        let _ = writeln!(out, "ddscope_latency_over_budget_total{{{},layer=\"{}\"}} {}", f.labels, Layer::ALL[i].as_str(), if z(f.born) { 0 } else { *n });
                    }
                }
            }
        }
        if !self.chains.is_empty() || !self.chain_instances.is_empty() {
            write_header(
                out,
                "ddscope_chain_latency_seconds",
                "A measured end-to-end chain (serve --path): hop e2e, layer chain_e2e (first topic's rclcpp_publish to the last topic's callback_start), and per hop its layers and node (the relay's callback_start to its publish).",
                Kind::Histogram,
            );
            for c in self.chains.values() {
                for (layer, h) in &c.layers {
                    let labels = format!("{},layer=\"{layer}\"", c.labels);
                    h.render_as(out, "ddscope_chain_latency_seconds", &labels, z(h.born));
                }
            }
            write_header(out, "ddscope_chain_instances_total", "Instances of a measured chain, with (complete) and without (incomplete: an instant missing) an end-to-end value.", Kind::Counter);
            for (chain, (complete, incomplete, born)) in &self.chain_instances {
                let mut l = String::new();
                push_label(&mut l, "chain", chain);
                for (status, n) in [("complete", complete), ("incomplete", incomplete)] {
                    let _ = writeln!(out, "ddscope_chain_instances_total{{{l},status=\"{status}\"}} {}", if z(*born) { 0 } else { *n });
                }
            }
        }
        if !self.clock_offsets.is_empty() {
            write_header(out, "ddscope_clock_offset_seconds", "Clock offset t_o of a capture point in use (Bosk et al. Eq. 9), subtracted from its timestamps.", Kind::Gauge);
            for (capture, ns) in &self.clock_offsets {
                let mut l = String::new();
                push_label(&mut l, "capture", capture);
                let _ = write!(out, "ddscope_clock_offset_seconds{{{l}}} ");
                write_value(out, *ns as f64 / 1e9);
                out.push('\n');
            }
        }

        // Capture health.
        let health: [HealthMetric; 4] = [
            ("ddscope_capture_packets_total", "Packets the capture delivered.", |h| h.packets_received),
            ("ddscope_capture_kernel_dropped_total", "Packets dropped because the capture buffer was full.", |h| h.kernel_dropped),
            ("ddscope_capture_interface_dropped_total", "Packets dropped by the interface or its driver.", |h| h.interface_dropped),
            ("ddscope_capture_bytes_total", "Bytes captured.", |h| h.bytes),
        ];
        for (name, help, get) in health {
            write_header(out, name, help, Kind::Counter);
            for h in self.health.values() {
                let mut l = String::new();
                push_label(&mut l, "capture", &h.capture);
                let _ = writeln!(out, "{name}{{{l}}} {}", get(h));
            }
        }
        write_header(out, "ddscope_decode_skipped_total", "Frames, datagrams or submessages the decoder skipped, by reason.", Kind::Counter);
        for h in self.health.values() {
            for (reason, n) in &h.decode_skipped {
                let mut l = String::new();
                push_label(&mut l, "capture", &h.capture);
                push_label(&mut l, "reason", reason);
                let _ = writeln!(out, "ddscope_decode_skipped_total{{{l}}} {n}");
            }
        }
        if self.health.values().any(|h| !h.trace.is_empty()) {
            write_header(out, "ddscope_trace_total", "The agent's live ros2_tracing session: events read, items sent, dropped (queue full), late, reconnects, by what.", Kind::Counter);
            for h in self.health.values() {
                for (what, n) in &h.trace {
                    let mut l = String::new();
                    push_label(&mut l, "capture", &h.capture);
                    push_label(&mut l, "what", what);
                    let _ = writeln!(out, "ddscope_trace_total{{{l}}} {n}");
                }
            }
        }
        if !self.topic_nodes.is_empty() {
            write_header(out, "ddscope_topic_node_info", "ROS 2 nodes owning a topic's writers and readers (from ros_discovery_info on the wire); join on capture and topic.", Kind::Gauge);
            for (capture, topic, role, node) in &self.topic_nodes {
                let mut l = String::new();
                push_label(&mut l, "capture", capture);
                push_label(&mut l, "topic", topic);
                push_label(&mut l, "role", role);
                push_label(&mut l, "node", node);
                let _ = writeln!(out, "ddscope_topic_node_info{{{l}}} 1");
            }
        }
        if !self.topic_rates.is_empty() {
            write_header(
                out,
                "ddscope_topic_rate_hz",
                "Samples per second over the last seconds as ros2 topic hz computes it: per writer (n-1)/(last-first), summed over the topic's steady writers; no series while bursty.",
                Kind::Gauge,
            );
            for (capture, topic, domain, hz) in &self.topic_rates {
                let mut l = String::new();
                push_label(&mut l, "capture", capture);
                push_label(&mut l, "topic", topic);
                push_label(&mut l, "domain", domain);
                let _ = writeln!(out, "ddscope_topic_rate_hz{{{l}}} {hz}");
            }
        }
        write_header(out, "ddscope_state_evicted_total", "State dropped to stay within a memory cap, by what.", Kind::Counter);
        for h in self.health.values() {
            for (what, n) in &h.evicted {
                let mut l = String::new();
                push_label(&mut l, "capture", &h.capture);
                push_label(&mut l, "what", what);
                let _ = writeln!(out, "ddscope_state_evicted_total{{{l}}} {n}");
            }
        }

        // The exporter itself.
        write_header(out, "ddscope_export_series", "Label sets held, by kind (topic or latency).", Kind::Gauge);
        let _ = writeln!(out, "ddscope_export_series{{kind=\"topic\"}} {}", self.series.len());
        let _ = writeln!(out, "ddscope_export_series{{kind=\"latency\"}} {}", self.flows.len());
        let _ = writeln!(out, "ddscope_export_series{{kind=\"chain\"}} {}", self.chains.len());
        write_header(out, "ddscope_export_dropped_series_total", "Label sets refused because the series cap was reached.", Kind::Counter);
        let _ = writeln!(out, "ddscope_export_dropped_series_total{{kind=\"topic\"}} {}", self.topic_overflow.dropped_series);
        let _ = writeln!(out, "ddscope_export_dropped_series_total{{kind=\"latency\"}} {}", self.flow_overflow.dropped_series);
        let _ = writeln!(out, "ddscope_export_dropped_series_total{{kind=\"chain\"}} {}", self.chain_overflow.dropped_series);
        let _ = writeln!(out, "ddscope_export_dropped_series_total{{kind=\"topic_node\"}} {}", self.topic_nodes_dropped);
        write_header(out, "ddscope_export_dropped_updates_total", "Updates lost because their label set was refused.", Kind::Counter);
        let _ = writeln!(out, "ddscope_export_dropped_updates_total{{kind=\"topic\"}} {}", self.topic_overflow.dropped_updates);
        let _ = writeln!(out, "ddscope_export_dropped_updates_total{{kind=\"latency\"}} {}", self.flow_overflow.dropped_updates);
        let _ = writeln!(out, "ddscope_export_dropped_updates_total{{kind=\"chain\"}} {}", self.chain_overflow.dropped_updates);
        write_header(out, "ddscope_export_records_total", "Records handed to a push sink, by outcome.", Kind::Counter);
        for (name, st) in &self.sinks {
            let s = st.snapshot();
            for (outcome, v) in [
                ("accepted", s.accepted),
                ("delivered", s.delivered),
                ("dropped_queue_full", s.dropped_queue_full),
                ("rejected", s.rejected),
                ("dropped_at_shutdown", s.dropped_at_shutdown),
                ("unencodable", s.unencodable),
            ] {
                let mut l = String::new();
                push_label(&mut l, "sink", name);
                let _ = writeln!(out, "ddscope_export_records_total{{{l},outcome=\"{outcome}\"}} {v}");
            }
        }
        let sink_metrics: [SinkMetric; 7] = [
            (
                "ddscope_export_refused_batches_total",
                "Batches the endpoint refused (wrong token, too large, bad request); dropped, not retried.",
                Kind::Counter,
                |s| s.refused_batches.load(Relaxed),
            ),
            ("ddscope_export_dropped_batches_total", "Batches dropped because the queue was full (the oldest first).", Kind::Counter, |s| s.dropped_batches.load(Relaxed)),
            ("ddscope_export_failed_attempts_total", "Failed delivery attempts (each is retried with backoff).", Kind::Counter, |s| s.failed_attempts.load(Relaxed)),
            ("ddscope_export_sent_bytes_total", "Request body bytes delivered.", Kind::Counter, |s| s.bytes_sent.load(Relaxed)),
            ("ddscope_export_queued_bytes", "Encoded bytes waiting for delivery.", Kind::Gauge, |s| s.queued_bytes.load(Relaxed)),
            ("ddscope_export_up", "1 when the last delivery attempt succeeded.", Kind::Gauge, |s| s.up.load(Relaxed) as u64),
            (
                "ddscope_export_evicted_keys_total",
                "Keys the sink's encoder forgot to stay within its cap (InfluxDB: the copy tag's (writer, sn, fragment) keys, oldest first).",
                Kind::Counter,
                |s| s.evicted_keys.load(Relaxed),
            ),
        ];
        for (name, help, kind, get) in sink_metrics {
            write_header(out, name, help, kind);
            for (sink, st) in &self.sinks {
                let mut l = String::new();
                push_label(&mut l, "sink", sink);
                let _ = writeln!(out, "{name}{{{l}}} {}", get(st));
            }
        }

        if let Some(t) = &self.trace_stats {
            write_header(
                out,
                "ddscope_trace_export_total",
                "One trace per sample (serve --export otlp): samples and deliveries with spans, deliveries left out by --trace-sample, spans, chain spans made and left out, samples forgotten.",
                Kind::Counter,
            );
            for (what, n) in t.pairs() {
                let _ = writeln!(out, "ddscope_trace_export_total{{what=\"{what}\"}} {n}");
            }
        }

        // System metrics (node_exporter names), merged across sources by family name.
        let mut merged: BTreeMap<&str, (&Family, Vec<&promtext::Sample>)> = BTreeMap::new();
        for fams in self.system.values() {
            for f in fams {
                merged.entry(f.name.as_str()).or_insert_with(|| (f, vec![])).1.extend(f.samples.iter());
            }
        }
        for (f, samples) in merged.values() {
            promtext::write_family(out, &Family { name: f.name.clone(), help: f.help.clone(), kind: f.kind, samples: samples.iter().map(|s| (*s).clone()).collect() });
        }
    }
}

/// Serves a registry at `http://ADDR/metrics` on its own thread.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
    addr: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
/// The reason is part of the message and not a `source()` as well, so that
/// an error chain (`{:#}`) does not print it twice.
#[error("cannot serve metrics on {addr}: {reason}")]
pub struct ServeError {
    pub addr: String,
    pub reason: Box<dyn std::error::Error + Send + Sync>,
}

impl MetricsServer {
    /// Binds `addr` (port 0 picks a free port; see [`MetricsServer::addr`]).
    /// With `token`, requests need `Authorization: Bearer TOKEN` (Prometheus:
    /// `authorization: {credentials: TOKEN}`); an address other than loopback
    /// is refused without a token.
    pub fn start(addr: &str, registry: Arc<Registry>, token: Option<&str>) -> Result<Self, ServeError> {
        let parsed: Option<SocketAddr> = addr.parse().ok();
        if token.is_none() && !parsed.is_some_and(|a| a.ip().is_loopback()) {
            return Err(ServeError {
                addr: addr.to_string(),
                reason: "listening on an address other than loopback (127.0.0.1, ::1) needs a token".into(),
            });
        }
        let server = tiny_http::Server::http(addr).map_err(|e| ServeError { addr: addr.to_string(), reason: e })?;
        let bound = match server.server_addr() {
            tiny_http::ListenAddr::IP(a) => a,
            #[allow(unreachable_patterns)]
            _ => return Err(ServeError { addr: addr.to_string(), reason: "not an IP listener".into() }),
        };
        let server = Arc::new(server);
        let s2 = server.clone();
        let token = token.map(|t| format!("Bearer {t}"));
        let thread = ddscope_sysstat::workers::spawn("ddscope-metrics", move || serve(&s2, &registry, token.as_deref()))
            .map_err(|e| ServeError { addr: addr.to_string(), reason: Box::new(e) })?;
        Ok(MetricsServer { server, thread: Some(thread), addr: bound })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Compares without an early exit (the token must not leak through timing).
fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("static header is valid")
}

fn serve(server: &tiny_http::Server, registry: &Registry, auth: Option<&str>) {
    for req in server.incoming_requests() {
        let path = req.url().split('?').next().unwrap_or("");
        if let Some(want) = auth {
            let ok = req.headers().iter().any(|h| h.field.equiv("Authorization") && ct_eq(h.value.as_str(), want));
            if !ok {
                let _ = req.respond(
                    tiny_http::Response::from_string("unauthorized\n").with_status_code(401).with_header(header("WWW-Authenticate", "Bearer")),
                );
                continue;
            }
        }
        let resp = match (req.method(), path) {
            (tiny_http::Method::Get | tiny_http::Method::Head, "/metrics") => {
                tiny_http::Response::from_string(registry.render()).with_header(header("Content-Type", promtext::CONTENT_TYPE))
            }
            (tiny_http::Method::Get, "/") => tiny_http::Response::from_string(
                "<html><body><h1>ddscope</h1><a href=\"/metrics\">/metrics</a></body></html>",
            )
            .with_header(header("Content-Type", "text/html; charset=utf-8")),
            (tiny_http::Method::Get | tiny_http::Method::Head, _) => tiny_http::Response::from_string("not found: try /metrics\n").with_status_code(404),
            _ => tiny_http::Response::from_string("method not allowed\n").with_status_code(405),
        };
        // A client that went away is not our problem.
        let _ = req.respond(resp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddscope_core::latency::Level;
    use ddscope_wire::{EntityId, GuidPrefix};

    fn event(topic: &str, w: u8, kind: SubmsgKind) -> SubmsgEvent {
        let mut e = SubmsgEvent::blank(Arc::from("pc1"));
        e.kind = kind;
        e.writer_id = Some(Guid::new(GuidPrefix([w; 12]), EntityId([0, 0, 1, 3])));
        e.topic = Some(Arc::new(TopicNames::new(topic, "T")));
        e.payload_size = Some(10);
        e
    }

    fn value(fams: &[Family], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        fams.iter().flat_map(|f| f.samples.iter()).find(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(*v))).map(|s| s.value)
    }

    #[test]
    fn series_cap_counts_what_it_refuses() {
        let r = Registry::new(RegistryConfig { max_series: 3, ..Default::default() }).unwrap();
        for i in 0..10u8 {
            for _ in 0..2 {
                r.on_event(&event(&format!("rt/t{i}"), i, SubmsgKind::Data));
            }
        }
        let f = r.families();
        let n = f.iter().find(|f| f.name == "ddscope_payload_bytes_total").unwrap().samples.len();
        assert_eq!(n, 3);
        assert_eq!(value(&f, "ddscope_export_dropped_series_total", &[("kind", "topic")]), Some(7.0));
        assert_eq!(value(&f, "ddscope_export_dropped_updates_total", &[("kind", "topic")]), Some(14.0));
        assert_eq!(r.dropped_series(), (7, 0));
    }

    #[test]
    fn sink_counters_are_live_including_refused_and_dropped_batches() {
        let r = Registry::new(RegistryConfig::default()).unwrap();
        let stats = Arc::new(SinkStats::default());
        r.register_sink("serve", stats.clone());
        stats.refused_batches.fetch_add(2, Relaxed);
        stats.rejected.fetch_add(7, Relaxed);
        stats.dropped_batches.fetch_add(1, Relaxed);
        // Read at scrape time: a later change shows without registering again.
        let f = r.families();
        assert_eq!(value(&f, "ddscope_export_refused_batches_total", &[("sink", "serve")]), Some(2.0));
        assert_eq!(value(&f, "ddscope_export_dropped_batches_total", &[("sink", "serve")]), Some(1.0));
        assert_eq!(value(&f, "ddscope_export_records_total", &[("sink", "serve"), ("outcome", "rejected")]), Some(7.0));
        stats.refused_batches.fetch_add(1, Relaxed);
        assert_eq!(value(&r.families(), "ddscope_export_refused_batches_total", &[("sink", "serve")]), Some(3.0));
    }

    /// A 4 MiB topic name (one that did not come through the decoder's name
    /// cap, e.g. from an agent's stream) renders as a label of at most the
    /// default name cap and its marker.
    #[test]
    fn long_label_values_are_capped() {
        let r = Registry::new(RegistryConfig::default()).unwrap();
        let long = format!("rt/{}", "x".repeat(4 << 20));
        r.on_event(&event(&long, 1, SubmsgKind::Data));
        let text = r.render();
        assert!(text.len() < 64 << 10, "{} bytes", text.len());
        let f = r.families();
        let s = &f.iter().find(|f| f.name == "ddscope_payload_bytes_total").unwrap().samples[0];
        let topic = s.label("topic").unwrap();
        assert!(topic.len() <= ddscope_core::names::capped_len(ddscope_core::names::DEFAULT_MAX_NAME_BYTES), "{}", topic.len());
        // (TopicNames::new cuts the raw name itself: the marker gives the raw name's length)
        assert!(topic.ends_with(&format!("…[truncated, {} bytes]", long.len())), "{topic}");
    }

    #[test]
    fn per_writer_labels_split_series() {
        let r = Registry::new(RegistryConfig { per_writer: true, ..Default::default() }).unwrap();
        r.on_event(&event("rt/a", 1, SubmsgKind::Data));
        r.on_event(&event("rt/a", 2, SubmsgKind::Data));
        r.on_event(&event("rt/a", 2, SubmsgKind::Heartbeat));
        let f = r.families();
        let s = &f.iter().find(|f| f.name == "ddscope_payload_bytes_total").unwrap().samples;
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|s| s.label("writer_id").is_some_and(|w| w.len() == 32)));
        assert_eq!(value(&f, "ddscope_heartbeats_total", &[("writer_id", &Guid::new(GuidPrefix([2; 12]), EntityId([0, 0, 1, 3])).to_string())]), Some(1.0));
    }

    fn row(level: Level, status: &'static str, lat: Option<i64>) -> LatencyRow {
        LatencyRow {
            sample_size: Some(10),
            frags_expected: Some(1),
            latency_ns: lat,
            first_first_ns: lat,
            last_last_ns: lat,
            repaired: status == "delivered" && lat == Some(3_000_000),
            ..LatencyRow::new(level, Some(Arc::new(TopicNames::new("rt/image", "T"))), Guid::default(), 1, Arc::from("pc1"), Arc::from("pc2"), status.parse().expect("a status"), 0)
        }
    }

    #[test]
    fn latency_rows_fill_histograms_and_status_counters() {
        let r = Registry::new(RegistryConfig::default()).unwrap();
        r.on_latency(&row(Level::Message, "delivered", Some(2_000_000)));
        r.on_latency(&row(Level::Message, "delivered", Some(3_000_000)));
        r.on_latency(&row(Level::Message, "delivered", Some(-5)));
        r.on_latency(&row(Level::Message, "lost", None));
        r.on_latency(&row(Level::Submessage, "delivered", Some(700_000)));
        let f = r.families();
        let l = [("topic", "/image"), ("sender", "pc1"), ("receiver", "pc2")];
        let with = |extra: (&'static str, &'static str)| {
            let mut v = l.to_vec();
            v.push(extra);
            v
        };
        assert_eq!(value(&f, "ddscope_latency_seconds_count", &with(("layer", "message"))), Some(2.0));
        assert_eq!(value(&f, "ddscope_latency_seconds_sum", &with(("layer", "message"))), Some(0.005));
        let mut b = with(("layer", "message"));
        b.push(("le", "0.0025"));
        assert_eq!(value(&f, "ddscope_latency_seconds_bucket", &b), Some(1.0));
        assert_eq!(value(&f, "ddscope_latency_seconds_count", &with(("layer", "submessage"))), Some(1.0));
        assert_eq!(value(&f, "ddscope_latency_negative_total", &with(("layer", "message"))), Some(1.0));
        assert_eq!(value(&f, "ddscope_latency_samples_total", &with(("status", "delivered"))), Some(3.0));
        assert_eq!(value(&f, "ddscope_latency_samples_total", &with(("status", "lost"))), Some(1.0));
        assert_eq!(value(&f, "ddscope_latency_repaired_samples_total", &l), Some(1.0));
    }

    fn ros_row(sn: i64, lat: i64, status: &'static str) -> LatencyRow {
        use ddscope_core::latency::RosColumns;
        LatencyRow {
            latency_ns: Some(lat),
            jitter_ns: Some(-250_000),
            timing: Some(if lat > 5_000_000 { ddscope_core::latency::Timing::Late } else { ddscope_core::latency::Timing::InTime }),
            ros: Some(Box::new(RosColumns { ros_publish_ns: Some(3_000), dds_send_ns: Some(40_000), executor_ns: Some(7_000), callback_ns: Some(-1), ..RosColumns::default() })),
            ..LatencyRow::new(Level::Message, Some(Arc::new(TopicNames::new("rt/image", "T"))), Guid::default(), sn, Arc::from("pc1"), Arc::from("pc2"), status.parse().expect("a status"), 0)
        }
    }

    /// Oracle: the rows fed. Every layer of a row lands in its histogram, the
    /// statuses, timing, jitter and budget counters count what the rows say.
    #[test]
    fn ros_layers_timing_jitter_and_budgets() {
        let cfg = RegistryConfig { budgets: vec!["/image=4ms".parse().unwrap(), "*:dds_send=30us".parse().unwrap()], ..Default::default() };
        let r = Registry::new(cfg).unwrap();
        r.on_latency(&ros_row(1, 2_000_000, "delivered"));
        r.on_latency(&ros_row(2, 6_000_000, "delivered"));
        r.on_latency(&LatencyRow { ros: ros_row(3, 0, "same_host").ros, ..LatencyRow::new(Level::Message, Some(Arc::new(TopicNames::new("rt/image", "T"))), Guid::default(), 3, Arc::from("pc1"), Arc::from("pc2"), ddscope_core::latency::Status::SameHost, 0) });
        let f = promtext::parse(&r.render_current()).unwrap();
        let l = |extra: &[(&'static str, &'static str)]| {
            let mut v = vec![("topic", "/image"), ("sender", "pc1"), ("receiver", "pc2")];
            v.extend_from_slice(extra);
            v
        };
        assert_eq!(value(&f, "ddscope_latency_seconds_count", &l(&[("layer", "message")])), Some(2.0));
        assert_eq!(value(&f, "ddscope_latency_seconds_count", &l(&[("layer", "dds_send")])), Some(3.0));
        assert_eq!(value(&f, "ddscope_latency_seconds_bucket", &l(&[("layer", "ros_publish"), ("le", "0.000005")])), Some(3.0));
        assert_eq!(value(&f, "ddscope_latency_seconds_bucket", &l(&[("layer", "ros_publish"), ("le", "0.0000025")])), Some(0.0));
        assert_eq!(value(&f, "ddscope_latency_negative_total", &l(&[("layer", "callback")])), Some(3.0));
        assert_eq!(value(&f, "ddscope_latency_samples_total", &l(&[("status", "same_host")])), Some(1.0));
        assert_eq!(value(&f, "ddscope_latency_samples_total", &l(&[("status", "delivered")])), Some(2.0));
        assert_eq!(value(&f, "ddscope_latency_timing_total", &l(&[("timing", "late")])), Some(1.0));
        assert_eq!(value(&f, "ddscope_latency_timing_total", &l(&[("timing", "in_time")])), Some(1.0));
        assert_eq!(value(&f, "ddscope_latency_jitter_seconds_count", &l(&[])), Some(2.0));
        assert_eq!(value(&f, "ddscope_latency_jitter_seconds_sum", &l(&[])), Some(0.0005));
        assert_eq!(value(&f, "ddscope_latency_over_budget_total", &l(&[("layer", "message")])), Some(1.0));
        assert_eq!(value(&f, "ddscope_latency_over_budget_total", &l(&[("layer", "dds_send")])), Some(3.0));
        assert_eq!(value(&f, "ddscope_latency_over_budget_total", &l(&[("layer", "executor")])), None, "no budget, no series");
        assert_eq!(value(&f, "ddscope_latency_budget_seconds", &[("topic", "*"), ("layer", "dds_send")]), Some(3e-5));
        r.set_clock_offsets(&[("pc2".into(), 37_000_000_000)]);
        assert_eq!(value(&promtext::parse(&r.render_current()).unwrap(), "ddscope_clock_offset_seconds", &[("capture", "pc2")]), Some(37.0));
    }

    /// A latency label set created after an endpoint's scrape shows zeros at its next scrape
    /// (Prometheus takes a series' first value as its start, so rate() would never count the
    /// observations it was created with), the values from then on; what exists at an endpoint's
    /// first scrape shows its values; two endpoints never make each other's counters go down.
    #[test]
    fn a_new_latency_series_is_scraped_with_zeros_first() {
        let r = Registry::new(RegistryConfig::default()).unwrap();
        r.on_latency(&ros_row(1, 2_000_000, "delivered"));
        let l = [("topic", "/image"), ("layer", "message"), ("le", "+Inf")];
        let count = |text: &str, layer: &str| value(&promtext::parse(text).unwrap(), "ddscope_latency_seconds_count", &[("layer", layer)]);
        // An endpoint's first scrape: the values.
        let first = promtext::parse(&r.render_for("a")).unwrap();
        assert_eq!(value(&first, "ddscope_latency_seconds_bucket", &l), Some(1.0));
        assert_eq!(value(&first, "ddscope_latency_samples_total", &[("status", "delivered")]), Some(1.0));
        // A layer and a flow created after it: zero at that endpoint's next scrape, then the values.
        r.on_latency(&LatencyRow { sender_stack_ns: Some(1_000), ..ros_row(2, 2_000_000, "delivered") });
        let mut other = ros_row(3, 3_000_000, "delivered");
        other.receiver = "pc3".into();
        r.on_latency(&other);
        let second = r.render_for("a");
        assert_eq!(count(&second, "sender_stack"), Some(0.0));
        assert_eq!(count(&second, "message"), Some(2.0));
        let f = promtext::parse(&second).unwrap();
        assert_eq!(value(&f, "ddscope_latency_seconds_count", &[("layer", "message"), ("receiver", "pc3")]), Some(0.0));
        // Another endpoint's scrapes in between change nothing for "a".
        let b = r.render_for("b");
        assert_eq!(count(&b, "sender_stack"), Some(1.0), "b's first scrape shows the values");
        let third = promtext::parse(&r.render_for("a")).unwrap();
        assert_eq!(value(&third, "ddscope_latency_seconds_count", &[("layer", "sender_stack")]), Some(1.0));
        assert_eq!(value(&third, "ddscope_latency_seconds_count", &[("layer", "message"), ("receiver", "pc3")]), Some(1.0));
        // Every counter of every series, over interleaved scrapes of both endpoints while rows
        // arrive, never goes down at either endpoint.
        let mut last: BTreeMap<(&str, String), f64> = BTreeMap::new();
        for i in 0..200u64 {
            let mut row = ros_row(10 + i as i64, 1_000_000 + i as i64, "delivered");
            row.receiver = format!("pc{}", 4 + i % 7).into();
            r.on_latency(&row);
            for ep in ["a", "b"] {
                if (i + ep.len() as u64) % 3 == 0 {
                    continue;
                }
                for fam in promtext::parse(&r.render_for(ep)).unwrap() {
                    for s in fam.samples {
                        let key = (ep, format!("{}{:?}", s.name, s.labels));
                        let prev = last.insert(key.clone(), s.value);
                        assert!(prev.is_none_or(|p| p <= s.value), "{key:?} went from {prev:?} to {}", s.value);
                    }
                }
            }
        }
        // OTLP's families carry the current values, and mark nothing.
        let r2 = Registry::new(RegistryConfig::default()).unwrap();
        r2.on_latency(&ros_row(1, 2_000_000, "delivered"));
        assert_eq!(value(&r2.families(), "ddscope_latency_seconds_bucket", &l), Some(1.0));
        assert_eq!(value(&promtext::parse(&r2.render()).unwrap(), "ddscope_latency_seconds_bucket", &l), Some(1.0));
    }

    /// Oracle: the chain rows fed (two instances of /a,/b; one without an end-to-end value).
    #[test]
    fn chain_rows_fill_hop_and_end_to_end_histograms_within_the_cap() {
        use ddscope_core::ros2::chain::{Hop, HopLayers};
        use ddscope_core::ros2::join::{Delivery, Join};
        let hop = |i: u32, instance: u64, topic: &str, e2e: Option<i64>| ChainRow {
            chain: Arc::from("/a,/b"),
            instance,
            hop: i,
            h: Hop {
                take: (0, instance * 2 + i as u64),
                cause: None,
                topic: Some(Arc::from(topic)),
                level: Delivery::Wire,
                join: Join::SourceTs,
                sender: Arc::from("pc1"),
                receiver: Arc::from("pc2"),
                sender_node: None,
                receiver_node: None,
                writer: None,
                sn: Some(1),
                source_ts: Some(0),
                rclcpp_ts: Some(0),
                take_ts: 0,
                callback_start_ts: Some(0),
                layers: HopLayers { ros_e2e: Some(1_000_000), message: Some(500_000), ..HopLayers::default() },
                inputs: Default::default(),
            },
            node_ns: (i == 0).then_some(20_000),
            chain_start_ts_ns: Some(0),
            chain_e2e_ns: e2e,
        };
        let r = Registry::new(RegistryConfig { max_latency_series: 3, ..Default::default() }).unwrap();
        for (inst, e2e) in [(1, Some(2_020_000)), (2, None)] {
            r.on_chain_row(&hop(0, inst, "/a", e2e));
            r.on_chain_row(&hop(1, inst, "/b", e2e));
        }
        let f = promtext::parse(&r.render_current()).unwrap();
        assert_eq!(value(&f, "ddscope_chain_latency_seconds_count", &[("hop", "e2e"), ("layer", "chain_e2e")]), Some(1.0));
        assert_eq!(value(&f, "ddscope_chain_latency_seconds_sum", &[("hop", "e2e"), ("layer", "chain_e2e")]), Some(0.00202));
        assert_eq!(value(&f, "ddscope_chain_latency_seconds_count", &[("hop", "0"), ("topic", "/a"), ("layer", "node")]), Some(2.0));
        assert_eq!(value(&f, "ddscope_chain_latency_seconds_count", &[("hop", "1"), ("topic", "/b"), ("layer", "ros_e2e")]), Some(2.0));
        assert_eq!(value(&f, "ddscope_chain_instances_total", &[("chain", "/a,/b"), ("status", "incomplete")]), Some(1.0));
        // A third hop position would be a fourth label set: refused and counted.
        r.on_chain_row(&hop(2, 3, "/c", None));
        assert_eq!(r.dropped_chain_series(), 1);
    }

    #[test]
    fn exposition_is_well_formed() {
        let r = Registry::new(RegistryConfig::default()).unwrap();
        let mut e = event("rt/a", 1, SubmsgKind::Vendor(0x80));
        r.on_event(&e);
        e.kind = SubmsgKind::DataFrag;
        e.frags_in_submsg = Some(10);
        r.on_event(&e);
        let mut info = SubmsgEvent::blank(Arc::from("pc1"));
        info.kind = SubmsgKind::InfoTs;
        r.on_event(&info);
        r.set_capture_health(&CaptureHealth { kernel_dropped: 3, ..CaptureHealth::new("pc1") });
        let text = r.render();
        let fams = promtext::parse(&text).unwrap();
        for f in &fams {
            assert!(f.name.starts_with("ddscope_"), "{}", f.name);
            assert!(!f.help.is_empty(), "{} has help", f.name);
            assert!(text.contains(&format!("# TYPE {} ", f.name)));
        }
        assert_eq!(value(&fams, "ddscope_submessages_total", &[("kind", "VENDOR(0x80)")]), Some(1.0));
        assert_eq!(value(&fams, "ddscope_rtps_fragments_total", &[("topic", "/a")]), Some(10.0));
        assert_eq!(value(&fams, "ddscope_submessages_total", &[("kind", "INFO_TS"), ("topic", "")]), Some(1.0));
        // INFO_TS alone (no writer) does not create zero series in the per-topic families.
        assert_eq!(fams.iter().find(|f| f.name == "ddscope_samples_total").unwrap().samples.len(), 1);
        assert_eq!(value(&fams, "ddscope_capture_kernel_dropped_total", &[("capture", "pc1")]), Some(3.0));
    }

    /// Oracle: the rates given; bursty and few topics have no series, silent ones 0.
    #[test]
    fn topic_rates_are_gauges() {
        use ddscope_core::rate::RateKind;
        let r = Registry::new(RegistryConfig { max_series: 3, ..Default::default() }).unwrap();
        let rate = |topic: &str, hz: Option<f64>, kind| TopicRate { capture: "pc1".into(), topic: topic.into(), domain: Some(0), rate_hz: hz, kind };
        r.set_topic_rates(&[
            rate("/a", Some(29.5), RateKind::Steady),
            rate("/b", None, RateKind::Bursty),
            rate("/c", None, RateKind::None),
            rate("/d", Some(3.0), RateKind::Mixed),
            rate("/e", Some(1.0), RateKind::Steady),
        ]);
        let fams = promtext::parse(&r.render()).unwrap();
        assert_eq!(value(&fams, "ddscope_topic_rate_hz", &[("topic", "/a"), ("domain", "0")]), Some(29.5));
        assert_eq!(value(&fams, "ddscope_topic_rate_hz", &[("topic", "/b")]), None);
        assert_eq!(value(&fams, "ddscope_topic_rate_hz", &[("topic", "/c")]), Some(0.0));
        assert_eq!(value(&fams, "ddscope_topic_rate_hz", &[("topic", "/d")]), Some(3.0));
        assert_eq!(value(&fams, "ddscope_topic_rate_hz", &[("topic", "/e")]), None); // over the cap of 3
    }

    #[test]
    fn bad_buckets_are_refused() {
        assert!(Registry::new(RegistryConfig { latency_buckets: vec![1.0, 0.5], ..Default::default() }).is_err());
        assert!(Registry::new(RegistryConfig { sample_size_buckets: vec![], ..Default::default() }).is_err());
    }
}
