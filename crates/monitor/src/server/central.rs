//! The central view: agents POST their batches here; the same correlator as
//! `ddscope latency` joins them; a web dashboard (assets built into the
//! binary) shows per-topic latency, sizes, bandwidth, CPU, loss and repairs.
//!
//! This module holds the state ([`Central`]); its caps are in `config.rs`
//! ([`StateCaps`](crate::server::config::StateCaps)), and the HTTP server in front of it (timeouts, connection
//! and rate limits, authentication) is `http.rs`. Everything keyed by what agents send is bounded: agents
//! (64; an idle one makes room for a new one), latency series per flow (least recently updated evicted, counted),
//! network devices per agent, the size of an agent's topic table and
//! counters, and what one `/api/state` answer carries.

use crate::server::config::{ServeConfig, MAX_AGENTS};
use crate::server::incidents::{explain_budgets, Incidents};
use crate::stream::protocol::{self, check_agent_name, Batch, MetricSample};
use ddscope_export::prometheus::{Registry, RegistryConfig};
use ddscope_sysstat::promtext::{Family, Kind as MetricKind, Sample};
use ddscope_export::traces::TraceSampling;
use ddscope_export::{ExportOptions, ExportSpec, Exporters};
use ddscope_core::bounded::BoundedMap;
use ddscope_core::latency::app::AppTruth;
use ddscope_core::latency::explain::ExplainOptions;
use ddscope_core::latency::live_explain::LiveExplainOptions;
use ddscope_core::latency::{Correlator, CorrelatorConfig, Level, LatencyRow};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// CPU, memory and bandwidth points kept per agent (and device).
const HISTORY_POINTS: usize = 600;
/// Network devices tracked per agent.
const MAX_DEVICES: usize = 32;


#[derive(Default)]
struct SystemHistory {
    last_cpu: Option<(f64, f64, f64)>,
    last_net: BTreeMap<String, (f64, f64, f64)>,
    cpu: VecDeque<(f64, f64)>,
    mem: VecDeque<(f64, f64)>,
    net: BTreeMap<String, VecDeque<(f64, f64, f64)>>,
    /// Samples for devices beyond [`MAX_DEVICES`], not kept.
    devices_refused: u64,
    /// Device names cut to the name cap.
    devices_cut: u64,
}

fn push<T>(q: &mut VecDeque<T>, v: T, cap: usize) {
    while q.len() >= cap.max(1) {
        q.pop_front();
    }
    q.push_back(v);
}

impl SystemHistory {
    /// Turns node_exporter counters into CPU utilisation and per-interface Mbit/s.
    fn add(&mut self, t: f64, samples: &[MetricSample], max_name: usize) {
        let label = |s: &MetricSample, k: &str| s.labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (mut idle, mut total) = (0.0, 0.0);
        let mut mem_total = None;
        let mut mem_avail = None;
        let mut net: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for s in samples {
            match s.name.as_str() {
                "node_cpu_seconds_total" => {
                    total += s.value;
                    if matches!(label(s, "mode").as_deref(), Some("idle") | Some("iowait")) {
                        idle += s.value;
                    }
                }
                "node_memory_MemTotal_bytes" => mem_total = Some(s.value),
                "node_memory_MemAvailable_bytes" => mem_avail = Some(s.value),
                "node_network_receive_bytes_total" | "node_network_transmit_bytes_total" => {
                    let dev = protocol::cap_name(label(s, "device").unwrap_or_default(), max_name, &mut self.devices_cut);
                    if !net.contains_key(&dev) && net.len() >= MAX_DEVICES {
                        self.devices_refused += 1;
                        continue;
                    }
                    let e = net.entry(dev).or_default();
                    if s.name == "node_network_receive_bytes_total" {
                        e.0 = s.value;
                    } else {
                        e.1 = s.value;
                    }
                }
                _ => {}
            }
        }
        if total > 0.0 {
            if let Some((pt, pi, ptot)) = self.last_cpu {
                let dt = total - ptot;
                if dt > 0.0 && t > pt {
                    push(&mut self.cpu, (t, 100.0 * (1.0 - (idle - pi) / dt)), HISTORY_POINTS);
                }
            }
            self.last_cpu = Some((t, idle, total));
        }
        if let (Some(tot), Some(av)) = (mem_total, mem_avail) {
            push(&mut self.mem, (t, (tot - av) / 1e6), HISTORY_POINTS);
        }
        for (dev, (rx, tx)) in net {
            if !self.last_net.contains_key(&dev) && self.last_net.len() >= MAX_DEVICES {
                self.devices_refused += 1;
                continue;
            }
            if let Some((pt, prx, ptx)) = self.last_net.get(&dev).copied() {
                if t > pt {
                    let rate = |a: f64, b: f64| ((a - b).max(0.0) * 8.0 / (t - pt)) / 1e6;
                    push(self.net.entry(dev.clone()).or_default(), (t, rate(rx, prx), rate(tx, ptx)), HISTORY_POINTS);
                }
            }
            self.last_net.insert(dev, (t, rx, tx));
        }
    }
}

struct Agent {
    idx: usize,
    last_seen: Instant,
    last_seq: u64,
    batches: u64,
    items: u64,
    seq_gaps: u64,
    dropped_items: u64,
    topics: Value,
    /// Topic rows the agent sent in its last table (before the cap).
    topic_rows_sent: usize,
    counters: Value,
    system: SystemHistory,
    ended: bool,
    /// The end the agent announced over OTLP, applied at this time (see `otlp_end_grace`).
    end_at: Option<Instant>,
    /// Its OTLP batch records held until their sightings are in.
    hold: crate::stream::otlp::AgentHold,
    /// The agent's trace in the correlator, once it sent a trace item.
    trace: Option<usize>,
    trace_items: u64,
    /// Sightings that came over the JSON stream after their sample was judged (counted, not fed):
    /// the agent had fallen silent for `--idle` and serve judged without it meanwhile.
    /// (Over OTLP they are counted in `hold.stats.late_sightings`.)
    late_sightings: u64,
}

#[derive(Default)]
struct FlowSeries {
    message: VecDeque<(f64, f64)>,
    submessage: VecDeque<(f64, f64)>,
    size: VecDeque<(f64, f64)>,
    /// Message latency per second of sample time: the open seconds' values (ns), and the closed
    /// seconds' (start s, p50 ms, p99 ms, samples), at most `points` of them.
    open_secs: std::collections::BTreeMap<i64, OpenSecond>,
    secs: VecDeque<(i64, f64, f64, u64)>,
}

/// Seconds of sample time a flow's percentiles stay open for rows judged out of order (serve judges
/// in about sample order); a row of a second already closed is counted in `percentile_rows_late`.
const OPEN_SECONDS: usize = 8;
/// Latencies kept per open second of a flow (16 KB); beyond, a uniform sample of the second's
/// latencies is kept (reservoir sampling, counted in `percentile_rows_sampled`).
const MAX_SECOND_VALUES: usize = 2_000;

/// One open second of a flow: its latencies (all of them, or a uniform sample of `seen`).
#[derive(Default)]
struct OpenSecond {
    values: Vec<i64>,
    seen: u64,
}

/// p50 and p99 (ms) of `v` by nearest rank ⌈q·n⌉, as the offline summaries.
fn p50_p99(v: &mut [i64]) -> (f64, f64) {
    v.sort_unstable();
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1] as f64 / 1e6;
    (at(0.5), at(0.99))
}

impl FlowSeries {
    fn add_second(&mut self, t_ns: i64, latency_ns: i64, points: usize, stats: &mut PercentileStats) {
        let sec = t_ns.div_euclid(1_000_000_000);
        if self.secs.back().is_some_and(|b| sec <= b.0) {
            stats.rows_late += 1;
            return;
        }
        let o = self.open_secs.entry(sec).or_default();
        o.seen += 1;
        if o.values.len() < MAX_SECOND_VALUES {
            o.values.push(latency_ns);
        } else {
            // reservoir sampling (Vitter's algorithm R) with a generator seeded by the flow's rows
            stats.rng = stats.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let j = ((stats.rng >> 33) % o.seen) as usize;
            if j < MAX_SECOND_VALUES {
                o.values[j] = latency_ns;
            }
            stats.rows_sampled += 1;
        }
        // Seconds well behind the newest close (in order: the closed ones only grow).
        let newest = *self.open_secs.keys().next_back().expect("just inserted");
        while self.open_secs.len() > OPEN_SECONDS || self.open_secs.keys().next().is_some_and(|&s| s < newest - OPEN_SECONDS as i64) {
            let (s, mut o) = self.open_secs.pop_first().expect("not empty");
            let (p50, p99) = p50_p99(&mut o.values);
            push(&mut self.secs, (s, p50, p99, o.seen), points);
        }
    }

    /// Every second's (start s, p50 ms, p99 ms, samples): the closed ones, then the open ones as they stand.
    fn seconds(&self) -> Vec<(i64, f64, f64, u64)> {
        let mut out: Vec<_> = self.secs.iter().copied().collect();
        for (s, o) in &self.open_secs {
            let mut v = o.values.clone();
            if !v.is_empty() {
                let (p50, p99) = p50_p99(&mut v);
                out.push((*s, p50, p99, o.seen));
            }
        }
        out
    }
}

/// What the per-second percentiles could not count.
#[derive(Default)]
struct PercentileStats {
    rows_late: u64,
    /// Rows of a second past its `MAX_SECOND_VALUES`: in its count, its percentiles from a uniform sample.
    rows_sampled: u64,
    rng: u64,
}

type SeriesKey = (String, String, String);
/// (writer, sn, receiver) of a sample judged lost.
type LostKey = (ddscope_wire::Guid, i64, Arc<str>);

/// The latency series per (topic, sender, receiver), at most `max_series`
/// of them: the least recently updated one makes room for a new one (counted).
struct SeriesStore {
    map: BoundedMap<SeriesKey, FlowSeries>,
    points: usize,
    percentiles: PercentileStats,
    /// The samples judged lost lately, oldest first (at most
    /// `stream.max_lost_keys`, the oldest forgotten and counted): a
    /// sighting of one of them that comes later is late.
    lost: BoundedMap<LostKey, ()>,
}

impl SeriesStore {
    fn new(max_series: usize, points: usize, max_lost: usize) -> Self {
        SeriesStore { map: BoundedMap::new(max_series.max(1)), points, percentiles: PercentileStats::default(), lost: BoundedMap::new(max_lost.max(1)) }
    }

    fn on_row(&mut self, r: LatencyRow) {
        if r.level == Level::Message && r.status == ddscope_core::latency::Status::Lost {
            self.lost.get_or_insert_keep_order((r.writer_id, r.sn, r.receiver.clone()), || (), &mut |_, _| {});
        }
        let Some(l) = r.latency_ns else { return };
        let topic = r.topic.as_ref().map(|t| t.topic_name.clone()).unwrap_or_else(|| format!("writer {}", r.writer_id));
        let points = self.points;
        let s = self.map.get_or_insert_with((topic, r.sender.to_string(), r.receiver.to_string()), FlowSeries::default, &mut |_, _| {});
        let t = r.sender_first_ts_ns as f64 / 1e9;
        match r.level {
            Level::Message => {
                push(&mut s.message, (t, l as f64 / 1e6), points);
                s.add_second(r.sender_first_ts_ns, l, points, &mut self.percentiles);
                if let Some(sz) = r.sample_size {
                    push(&mut s.size, (t, sz as f64), points);
                }
            }
            Level::Submessage => push(&mut s.submessage, (t, l as f64 / 1e6), points),
            // Router hops come from Zenoh captures merged by `latency`; serve's series have no place for them yet.
            Level::Router => {}
        }
    }
}

/// At most `max` points of `q` as `[t, v]` pairs: every k-th, counted back
/// from the newest so the latest point is always there.
fn thin<T: Copy>(q: &VecDeque<T>, max: usize, pair: impl Fn(T) -> Value) -> Vec<Value> {
    let n = q.len();
    if n <= max {
        return q.iter().map(|v| pair(*v)).collect();
    }
    let step = n.div_ceil(max.max(1));
    let mut out: Vec<Value> = (0..n).rev().step_by(step).map(|i| pair(q[i])).collect();
    out.reverse();
    out
}

/// Counters of the HTTP layer, shown in `/api/state` under `server`.
pub type ServerCounters = Value;

/// Where the correlator's rows go, as a row stage: the exporters look at each
/// row, the dashboard's series store takes it.
struct ServeRows<'a> {
    series: &'a mut SeriesStore,
    timeline: &'a mut ddscope_core::timeline::Timeline,
    export: Option<&'a Exporters>,
    incidents: &'a mut Incidents,
}

impl ddscope_core::sink::RowSink<LatencyRow> for ServeRows<'_> {
    fn row(&mut self, r: &LatencyRow) {
        self.take(r.clone())
    }
    fn take(&mut self, r: LatencyRow) {
        if let Some(e) = self.export {
            e.on_latency(&r);
        }
        self.incidents.row(&r, self.export);
        self.timeline.row(&r);
        self.series.on_row(r);
    }
}

/// Windows of the incident feed open at once: its cap, or what the grace spans (plus the one filling), at most 64.
fn live_open(cfg: &ServeConfig) -> usize {
    let grace = cfg.explain.grace_ns.max(cfg.window_ns + cfg.idle.as_nanos() as i64 + 1_000_000_000);
    let w = cfg.explain.window_ns.max(1);
    cfg.explain.max_open.max((grace / w + 2).min(64) as usize)
}

pub struct Central {
    cfg: ServeConfig,
    /// `/metrics` and the `--export` sinks (None with `metrics` off and no export).
    export: Option<Box<Exporters>>,
    corr: Correlator,
    decoder: protocol::ItemDecoder,
    agents: BTreeMap<String, Agent>,
    series: SeriesStore,
    /// The latest rows, for `/api/timeline`.
    timeline: ddscope_core::timeline::Timeline,
    /// The live incident feed ("why was it late", judged per window of sample time).
    incidents: Incidents,
    /// Batches refused after they were read (bad JSON, bad agent name, agent cap).
    pub(crate) rejected: u64,
    bad_items: u64,
    /// Topic rows not kept because an agent sent more than the cap.
    topic_rows_truncated: u64,
    /// Topic tables or counters dropped because they were larger than the cap.
    oversized_documents: u64,
    /// Idle agents evicted to make room for new ones, and new agents refused because none was idle.
    agents_evicted: u64,
    agents_refused: u64,
    started: Instant,
}

impl Central {
    /// A central state with the `/metrics` registry (when `cfg.metrics`) but
    /// without push sinks (`cfg.export` is ignored: see [`Central::start`]).
    pub fn new(cfg: ServeConfig) -> Self {
        let export = cfg.metrics.then(|| Self::exporters(&cfg, &[]).expect("a registry without sinks always starts"));
        Self::with_export(cfg, export)
    }

    /// A central state exporting to `cfg.export` (binds `prometheus=ADDR`, starts the push sinks).
    pub fn start(cfg: ServeConfig) -> Result<Self, ddscope_export::ExportError> {
        let export = if cfg.metrics || !cfg.export.is_empty() { Some(Self::exporters(&cfg, &cfg.export)?) } else { None };
        Ok(Self::with_export(cfg, export))
    }

    fn exporters(cfg: &ServeConfig, specs: &[ExportSpec]) -> Result<Box<Exporters>, ddscope_export::ExportError> {
        let opts = ExportOptions {
            registry: RegistryConfig { max_latency_series: cfg.max_export_series, budgets: cfg.budgets.clone(), ..RegistryConfig::default() },
            metrics_token: cfg.token.clone().filter(|t| !t.is_empty()),
            // serve is no capture point: no system metrics of its own host.
            system: None,
            sample_traces: Some(TraceSampling {
                budgets: ddscope_export::Budgets::new(&cfg.budgets),
                max_remembered: cfg.stream.max_traced_samples,
                ..cfg.trace_sampling.clone()
            }),
            ..ExportOptions::default()
        };
        Ok(Box::new(Exporters::start(&format!("serve {}", cfg.listen), specs, opts)?))
    }

    fn with_export(cfg: ServeConfig, export: Option<Box<Exporters>>) -> Self {
        let caps = ddscope_core::limits::Limits { correlation: cfg.correlation, trace: cfg.trace, ..Default::default() };
        let corr = Correlator::new(
            caps.correlator(CorrelatorConfig {
                captures: vec![],
                offsets_ns: vec![],
                window_ns: cfg.window_ns,
                period_ns: None,
                message_rows: true,
                submessage_rows: true,
                track_clocks: cfg.track_clocks,
                ros: {
                    let mut ros = ddscope_core::latency::RosOptions::default();
                    ros.chain.path = cfg.chain_path.clone();
                    // Chain rows are drained after every batch and tick, only to the exporters.
                    ros.chain.rows = export.is_some();
                    ros
                },
                ..Default::default()
            }),
            Arc::new(AppTruth::default()),
        );
        let series = SeriesStore::new(cfg.caps.max_series, cfg.caps.series_points, cfg.stream.max_lost_keys);
        let incidents = Incidents::new(
            LiveExplainOptions {
                // A window's rows are in once the correlator's window (lost samples), the time an agent or its
                // trace may lag before it stops holding back judgement (--idle) and a second more have passed;
                // enough windows stay open to cover that (each holding a share of the samples kept).
                grace_ns: cfg.explain.grace_ns.max(cfg.window_ns + cfg.idle.as_nanos() as i64 + 1_000_000_000),
                max_open: live_open(&cfg),
                explain: ExplainOptions {
                    budgets: explain_budgets(&cfg.budgets),
                    max_samples: (cfg.explain.explain.max_samples * cfg.explain.max_open / live_open(&cfg)).max(10_000),
                    ..cfg.explain.explain.clone()
                },
                ..cfg.explain.clone()
            },
            cfg.idle,
        );
        let stream = cfg.stream;
        let timeline = ddscope_core::timeline::Timeline::latest(cfg.timeline);
        if let Some(e) = export.as_deref() {
            e.set_clock_offsets(&cfg.offsets);
        }
        Central {
            cfg,
            export,
            corr,
            decoder: protocol::ItemDecoder::new(stream),
            agents: BTreeMap::new(),
            series,
            timeline,
            incidents,
            rejected: 0,
            bad_items: 0,
            topic_rows_truncated: 0,
            oversized_documents: 0,
            agents_evicted: 0,
            agents_refused: 0,
            started: Instant::now(),
        }
    }

    /// An agent's JSON document (topic table, counters), capped: arrays keep
    /// their first `rows` entries, anything larger than the byte cap is dropped.
    fn capped(&mut self, mut v: Value, rows: Option<usize>) -> (Value, usize) {
        let mut sent = 0;
        if let (Some(max), Value::Array(a)) = (rows, &mut v) {
            sent = a.len();
            if a.len() > max {
                self.topic_rows_truncated += (a.len() - max) as u64;
                a.truncate(max);
            }
        }
        let size = serde_json::to_vec(&v).map(|b| b.len()).unwrap_or(usize::MAX);
        if size > self.cfg.caps.agent_json_bytes {
            self.oversized_documents += 1;
            return (json!({"note": format!("not kept: {size} bytes of JSON, more than the cap of {}", self.cfg.caps.agent_json_bytes)}), sent);
        }
        (v, sent)
    }

    /// Takes one batch from an agent.
    pub fn ingest(&mut self, b: Batch) -> Result<(), String> {
        self.ingest_from(b, false, false).map(|_| ())
    }

    /// Takes one batch decoded from OTLP ([`crate::stream::otlp`]): sightings
    /// (`record` false; `seq` is the agent batch they came in, 0 if unknown:
    /// only their items count), or a batch record (watermark, counters, end;
    /// held until its sightings are in, see [`ServeConfig::otlp_hold`]).
    /// Returns the items refused one by one (counted in `bad_items`; a bad
    /// writer GUID, …) with the first reason: OTLP's partial success tells the
    /// sender about them.
    pub fn ingest_otlp(&mut self, b: Batch, record: bool) -> Result<(u64, Option<String>), String> {
        self.ingest_from(b, true, record)
    }

    fn ingest_from(&mut self, b: Batch, otlp: bool, record: bool) -> Result<(u64, Option<String>), String> {
        let data_only = otlp && !record;
        check_agent_name(&b.agent)?;
        let idx = match self.agents.get(&b.agent) {
            Some(a) => a.idx,
            None => {
                let offset = self.offset_of(&b.agent);
                let idx = if self.agents.len() >= MAX_AGENTS {
                    let i = self.evict_idle_agent(&b.agent)?;
                    self.corr.set_offset(i, offset);
                    i
                } else {
                    self.corr.add_capture(&b.agent, offset)
                };
                // An offset given for the agent (--offset) is taken as it is, not tracked.
                if idx > 0 && self.cfg.offsets.iter().any(|(n, _)| n == &b.agent) {
                    self.corr.set_clock_trust(idx, ddscope_core::latency::ClockTrust::Given);
                }
                self.agents.insert(
                    b.agent.clone(),
                    Agent {
                        idx,
                        last_seen: Instant::now(),
                        last_seq: 0,
                        batches: 0,
                        items: 0,
                        seq_gaps: 0,
                        dropped_items: 0,
                        topics: Value::Null,
                        topic_rows_sent: 0,
                        counters: Value::Null,
                        system: SystemHistory::default(),
                        ended: false,
                        end_at: None,
                        hold: crate::stream::otlp::AgentHold::new(self.cfg.window_ns),
                        trace: None,
                        trace_items: 0,
                        late_sightings: 0,
                    },
                );
                idx
            }
        };
        let topics = b.topics.map(|t| self.capped(t, Some(self.cfg.caps.agent_topic_rows)));
        let counters = b.counters.map(|c| self.capped(c, None).0);
        let mut rows = ServeRows { series: &mut self.series, timeline: &mut self.timeline, export: self.export.as_deref(), incidents: &mut self.incidents };
        let Some(a) = self.agents.get_mut(&b.agent) else {
            return Err("agent table changed while ingesting".into());
        };
        a.last_seen = Instant::now();
        a.items += b.items.len() as u64;
        if !data_only {
            if b.seq > a.last_seq.saturating_add(1) && a.last_seq > 0 {
                a.seq_gaps = a.seq_gaps.saturating_add(b.seq - a.last_seq - 1);
            }
            a.last_seq = a.last_seq.max(b.seq);
            a.batches += 1;
            a.dropped_items = b.dropped_items;
        }
        if let Some((t, sent)) = topics {
            a.topics = t;
            a.topic_rows_sent = sent;
        }
        if let Some(c) = counters {
            a.counters = c;
        }
        if !b.system.is_empty() {
            a.system.add(b.sent_ns as f64 / 1e9, &b.system, self.cfg.stream.max_name_bytes);
        }
        let was_ended = a.ended;
        // Sightings over OTLP say nothing about the agent's end; an OTLP end is held (`otlp_hold`) and then waits `otlp_end_grace`.
        let last = if data_only { was_ended } else { b.last && !otlp };
        let mut items = b.items;
        if otlp && !data_only {
            // The record's watermark and end wait for the sightings sent before them (see `release`).
            let watermark = items.iter().filter_map(|i| if let protocol::StreamItem::Watermark { t } = i { Some(*t) } else { None }).max();
            items.clear();
            a.hold.hold(crate::stream::otlp::HeldRecord { seq: b.seq, watermark, last: b.last, arrived: Instant::now() }, self.cfg.otlp_hold_max);
        }
        a.ended = last;
        let name: Arc<str> = Arc::from(b.agent.as_str());
        if was_ended && !last {
            self.corr.set_ended(idx, false, &mut rows);
            if let Some(t) = a.trace {
                self.corr.set_trace_ended(t, false, &mut rows);
            }
        }
        let mut refused = 0u64;
        let mut why = None;
        for w in items {
            match self.decoder.decode(&name, w) {
                Ok(protocol::Decoded::Capture(item)) => {
                    // Late over either stream: an OTLP sighting behind the broadcast records, or a JSON
                    // one from an agent that fell silent for --idle while serve judged without it.
                    if late(&self.corr, rows.series, idx, &name, &item) {
                        if data_only {
                            a.hold.stats.late_sightings += 1;
                        } else {
                            a.late_sightings += 1;
                        }
                        continue;
                    }
                    self.corr.push(idx, item, &mut rows)
                }
                Ok(protocol::Decoded::Trace(item)) => {
                    let t = *a.trace.get_or_insert_with(|| self.corr.add_trace(idx));
                    a.trace_items += 1;
                    self.corr.push_trace(t, item, &mut rows);
                }
                Err(e) => {
                    self.bad_items += 1;
                    refused += 1;
                    why.get_or_insert(e);
                }
            }
        }
        if last && !was_ended {
            self.corr.set_ended(idx, true, &mut rows);
            if let Some(t) = a.trace {
                self.corr.set_trace_ended(t, true, &mut rows);
            }
        }
        if data_only {
            a.hold.spans(b.seq, Instant::now());
        }
        if otlp {
            self.release(&b.agent);
        }
        self.drain_chains();
        Ok((refused, why))
    }

    /// The table of agents is full and `newcomer` arrives: the agent idle the
    /// longest makes room — idle meaning it no longer holds back judgement
    /// (silent for `--idle`, or it announced its end) and has no OTLP records
    /// held. Its slot in the correlator goes to the newcomer
    /// ([`Correlator::replace_capture`]); counted in `agents_evicted`. With no
    /// agent idle the newcomer is refused (counted in `agents_refused`).
    fn evict_idle_agent(&mut self, newcomer: &str) -> Result<usize, String> {
        let victim = self
            .agents
            .iter()
            .filter(|(_, a)| a.ended && a.end_at.is_none() && a.hold.is_empty())
            .min_by_key(|(_, a)| a.last_seen)
            .map(|(n, _)| n.clone());
        let Some(old) = victim.and_then(|n| self.agents.remove(&n)) else {
            self.agents_refused += 1;
            return Err(format!(
                "at most {MAX_AGENTS} agents, and none is idle (an agent is idle once silent for --idle, {} s, or ended)",
                self.cfg.idle.as_secs()
            ));
        };
        self.agents_evicted += 1;
        let mut rows = ServeRows { series: &mut self.series, timeline: &mut self.timeline, export: self.export.as_deref(), incidents: &mut self.incidents };
        Ok(self.corr.replace_capture(old.idx, newcomer, &mut rows))
    }

    /// Lets an agent's held OTLP batch records take effect once their
    /// sightings are in (a sighting of a later batch arrived) or their hold expired.
    fn release(&mut self, agent: &str) {
        let now = Instant::now();
        let mut rows = ServeRows { series: &mut self.series, timeline: &mut self.timeline, export: self.export.as_deref(), incidents: &mut self.incidents };
        let Some(a) = self.agents.get_mut(agent) else { return };
        for r in a.hold.release(now, self.cfg.otlp_hold) {
            if let Some(t) = r.watermark {
                self.corr.push(a.idx, ddscope_core::latency::Item::Watermark(t), &mut rows);
            }
            a.end_at = r.last.then(|| now + self.cfg.otlp_end_grace);
        }
    }

    /// What the holds of all agents did, with the pipeline skew they saw.
    pub fn hold_stats(&self) -> crate::stream::otlp::HoldStats {
        let mut s = crate::stream::otlp::HoldStats::default();
        for a in self.agents.values() {
            s.add(&a.hold.stats);
        }
        s
    }

    /// Agents silent for too long stop holding back judgement.
    pub fn tick(&mut self) {
        let names: Vec<String> = self.agents.iter().filter(|(_, a)| !a.hold.is_empty()).map(|(n, _)| n.clone()).collect();
        for n in names {
            self.release(&n);
        }
        let idle = self.cfg.idle;
        let mut rows = ServeRows { series: &mut self.series, timeline: &mut self.timeline, export: self.export.as_deref(), incidents: &mut self.incidents };
        for a in self.agents.values_mut() {
            let announced = a.end_at.is_some_and(|t| Instant::now() >= t);
            // An agent with records held is not idle: its sightings are still on the way.
            if !a.ended && ((a.last_seen.elapsed() > idle && a.hold.is_empty()) || announced) {
                a.end_at = None;
                a.ended = true;
                self.corr.set_ended(a.idx, true, &mut rows);
                if let Some(t) = a.trace {
                    self.corr.set_trace_ended(t, true, &mut rows);
                }
            }
        }
        let export = self.export.as_deref();
        let settled = self.corr.pending().0 == 0;
        self.incidents.tick(settled, export);
        self.drain_chains();
    }

    /// Judges the incident windows still open (serve is stopping).
    pub fn flush_incidents(&mut self) {
        let export = self.export.as_deref();
        self.incidents.flush(export);
    }

    /// The live incident feed: totals and the newest `feed` incidents.
    pub fn incidents(&self, feed: usize) -> Value {
        self.incidents.json(feed)
    }

    /// Hands the chain instances evaluated since the last call to the exporters.
    fn drain_chains(&mut self) {
        let Some(ex) = self.export.as_deref() else { return };
        for r in self.corr.take_chain_rows() {
            ex.on_chain_row(&r);
        }
    }

    /// The shard's mergeable document ([`crate::server::federation`]): the state's
    /// counters and agents, with every flow's statistics in mergeable form.
    pub fn mergeable(&self, server: ServerCounters, rate_limited: &dyn Fn(&str) -> u64) -> Value {
        let mut v = self.state(server, rate_limited);
        v["flows"] = serde_json::to_value(crate::server::federation::flow_parts(&self.corr)).unwrap_or_default();
        v["counters"] = json!({"rejected_batches": self.rejected, "bad_items": self.bad_items});
        v
    }

    /// Device names cut to the name cap, over all agents.
    fn devices_cut(&self) -> u64 {
        self.agents.values().map(|a| a.system.devices_cut).sum()
    }

    /// The clock offset given for agent `name` (`--offset`), else 0.
    fn offset_of(&self, name: &str) -> i64 {
        self.cfg.offsets.iter().rev().find(|(n, _)| n == name).map_or(0, |(_, o)| *o)
    }

    /// Where `--export prometheus=ADDR` serves `/metrics`, if given.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.export.as_deref().and_then(|e| e.metrics_addr())
    }

    /// The registry `/metrics` serves, if kept.
    pub fn registry(&self) -> Option<Arc<Registry>> {
        self.export.as_deref().map(|e| e.registry().clone())
    }

    /// Waits up to `timeout` for the push sinks to deliver what they queued.
    pub fn flush_export(&self, timeout: Duration) -> bool {
        self.export.as_deref().is_none_or(|e| e.flush(timeout))
    }

    /// The push sinks' counters (name, snapshot).
    pub fn export_stats(&self) -> Vec<(&'static str, ddscope_export::SinkStatsSnapshot)> {
        self.export.as_deref().map(|e| e.sink_stats()).unwrap_or_default()
    }

    /// `serve`'s own state as metric families for `/metrics`: its agents (replicated on every shard:
    /// aggregate them with max, not sum), the correlation's counters, evictions and the OTLP hold.
    pub fn metric_families(&self) -> Vec<Family> {
        let now = Instant::now();
        let fam = |name: &str, help: &str, kind: MetricKind, samples: Vec<Sample>| Family { name: name.into(), help: help.into(), kind, samples };
        let l = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        let per_agent = |name: &str, f: &dyn Fn(&Agent) -> f64| -> Vec<Sample> {
            self.agents.iter().map(|(n, a)| Sample::new(name, l(&[("agent", n)]), f(a))).collect()
        };
        let kernel = |a: &Agent, k: &str| a.counters.get("kernel").and_then(|c| c.get(k)).and_then(|v| v.as_f64()).unwrap_or(0.0);
        let mut out = vec![
            fam("ddscope_serve_agent_up", "1 while the agent holds judgement back (it sends and has not ended), 0 once it ended or fell silent for --idle.", MetricKind::Gauge, per_agent("ddscope_serve_agent_up", &|a| if a.ended { 0.0 } else { 1.0 })),
            fam("ddscope_serve_agent_last_seen_seconds", "Seconds since the agent's last batch reached serve.", MetricKind::Gauge, per_agent("ddscope_serve_agent_last_seen_seconds", &|a| now.duration_since(a.last_seen).as_secs_f64())),
            fam("ddscope_serve_agent_batches_total", "Batches the agent sent.", MetricKind::Counter, per_agent("ddscope_serve_agent_batches_total", &|a| a.batches as f64)),
            fam("ddscope_serve_agent_items_total", "Correlation items the agent sent.", MetricKind::Counter, per_agent("ddscope_serve_agent_items_total", &|a| a.items as f64)),
            fam("ddscope_serve_agent_lost_batches_total", "Batches lost on the way (gaps in the agent's sequence numbers).", MetricKind::Counter, per_agent("ddscope_serve_agent_lost_batches_total", &|a| a.seq_gaps as f64)),
            fam("ddscope_serve_agent_dropped_items_total", "Items the agent dropped because serve was unreachable (its queue was full).", MetricKind::Counter, per_agent("ddscope_serve_agent_dropped_items_total", &|a| a.dropped_items as f64)),
            fam("ddscope_serve_agent_kernel_dropped_total", "The agent's capture: packets the kernel dropped (ring full), as the agent last reported.", MetricKind::Counter, per_agent("ddscope_serve_agent_kernel_dropped_total", &|a| kernel(a, "dropped"))),
            fam("ddscope_serve_agent_late_sightings_total", "Sightings that came after their sample was judged (counted, not fed): over OTLP behind the broadcast records, or from an agent that fell silent for --idle.", MetricKind::Counter, per_agent("ddscope_serve_agent_late_sightings_total", &|a| (a.late_sightings + a.hold.stats.late_sightings) as f64)),
            fam("ddscope_serve_agent_trace_items_total", "ros2_tracing items the agent sent (agent --trace-live).", MetricKind::Counter, per_agent("ddscope_serve_agent_trace_items_total", &|a| a.trace_items as f64)),
        ];
        let mut corr = vec![];
        let mut gauges = vec![];
        if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(&self.corr.stats) {
            for (k, v) in m {
                let Some(v) = v.as_f64() else { continue };
                if matches!(k.as_str(), "max_pending_samples" | "max_pending_submessages" | "flows" | "flow_bytes") {
                    gauges.push(Sample::new("ddscope_serve_correlation", l(&[("what", &k)]), v));
                } else {
                    corr.push(Sample::new("ddscope_serve_correlation_total", l(&[("what", &k)]), v));
                }
            }
        }
        let (ps, pf) = self.corr.pending();
        gauges.push(Sample::new("ddscope_serve_correlation", l(&[("what", "pending_samples")]), ps as f64));
        gauges.push(Sample::new("ddscope_serve_correlation", l(&[("what", "pending_submessages")]), pf as f64));
        out.push(fam("ddscope_serve_correlation_total", "The correlator's counters (/api/state → correlation): samples and submessages judged, and what it gave up to stay within its caps.", MetricKind::Counter, corr));
        out.push(fam("ddscope_serve_correlation", "The correlator's state: pending samples and submessages, flows and their bytes, the largest pending counts.", MetricKind::Gauge, gauges));
        let (te, we) = self.decoder.evicted();
        let evicted = [
            ("agents_evicted", self.agents_evicted),
            ("agents_refused", self.agents_refused),
            ("series_evicted", self.series.map.evicted()),
            ("percentile_rows_late", self.series.percentiles.rows_late),
            ("percentile_rows_sampled", self.series.percentiles.rows_sampled),
            ("lost_keys_forgotten", self.series.lost.evicted()),
            ("topic_rows_truncated", self.topic_rows_truncated),
            ("oversized_documents", self.oversized_documents),
            ("stream_topics_evicted", te),
            ("stream_writers_evicted", we),
            ("rejected_batches", self.rejected),
            ("bad_items", self.bad_items),
        ];
        out.push(fam(
            "ddscope_serve_refused_total",
            "What serve refused, evicted or cut to stay within its caps (/api/state → limits), by what.",
            MetricKind::Counter,
            evicted.iter().map(|(w, n)| Sample::new("ddscope_serve_refused_total", l(&[("what", w)]), *n as f64)).collect(),
        ));
        let h = self.hold_stats();
        out.push(fam(
            "ddscope_serve_otlp_hold_total",
            "Batch records that came over OTLP: held, released by a later sighting or by time, folded (evicted), and late sightings (docs/scale-out.md).",
            MetricKind::Counter,
            [("held", h.held), ("released_by_spans", h.released_by_spans), ("released_by_time", h.released_by_time), ("evicted", h.evicted), ("late_sightings", h.late_sightings)]
                .iter()
                .map(|(w, n)| Sample::new("ddscope_serve_otlp_hold_total", l(&[("what", w)]), *n as f64))
                .collect(),
        ));
        // The clock tracker's view of each agent's clock against the first agent's (docs/latency.md "Clocks").
        let clocks = self.corr.clock_summaries();
        if !clocks.is_empty() {
            let per = |f: &dyn Fn(&ddscope_core::latency::clock::ClockSummary) -> Option<f64>, name: &str| -> Vec<Sample> {
                clocks.iter().filter_map(|c| Some(Sample::new(name, l(&[("capture", &c.capture)]), f(c)?))).collect()
            };
            out.push(fam(
                "ddscope_clock_estimate_offset_seconds",
                "The capture point's clock against the first agent's, by the clock tracker's latest line (from traffic seen both ways).",
                MetricKind::Gauge,
                per(&|c| c.last_offset_ns.map(|o| o as f64 / 1e9), "ddscope_clock_estimate_offset_seconds"),
            ));
            out.push(fam(
                "ddscope_clock_error_bar_seconds",
                "The clock tracker's error bar (mean over the instants its lines corrected): every cross-host figure with this agent carries it.",
                MetricKind::Gauge,
                per(&|c| c.mean_uncertainty_ns.map(|u| u as f64 / 1e9), "ddscope_clock_error_bar_seconds"),
            ));
            let claims = self.clock_claims();
            if !claims.is_empty() {
                out.push(fam(
                    "ddscope_clock_claim_contradicted",
                    "1 when the traffic puts the agent's clock further from the first agent's than both hosts' time daemons (chrony, ptp4l) say their clocks can be (/api/state → clock_claims).",
                    MetricKind::Gauge,
                    claims.iter().map(|c| Sample::new("ddscope_clock_claim_contradicted", l(&[("capture", &c.capture)]), c.contradicted as u8 as f64)).collect(),
                ));
            }
            out.push(fam(
                "ddscope_clock_exchanges_total",
                "Submessages seen at this agent and at the first one (the clock tracker's evidence).",
                MetricKind::Counter,
                per(&|c| Some(c.matched as f64), "ddscope_clock_exchanges_total"),
            ));
        }
        if let Some(j) = self.corr.join_stats().and_then(|j| serde_json::to_value(j).ok()) {
            let samples: Vec<Sample> = j
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some(Sample::new("ddscope_serve_ros2_join_total", l(&[("what", k)]), v.as_u64()? as f64)))
                .collect();
            out.push(fam("ddscope_serve_ros2_join_total", "The ROS 2 join's counters (/api/state → ros2.join): takes joined each way, ambiguous, unjoined, evicted.", MetricKind::Counter, samples));
        }
        out
    }

    /// What each agent's time daemons claim of its clock (its counters' `clock_sync`), set against the
    /// clock tracker's line between it and the first agent (docs/latency.md "Clocks").
    pub fn clock_claims(&self) -> Vec<ddscope_core::latency::clock::ClaimCheck> {
        use crate::agent::clocksync::ClockReading;
        let claim = |name: &str| -> Option<(i64, String)> {
            let a = self.agents.get(name)?;
            let r: ClockReading = serde_json::from_value(a.counters.get("clock_sync")?.clone()).ok()?;
            let c = r.claim()?;
            Some((c.bound_ns?, c.source.clone()))
        };
        let Some((reference, _)) = self.agents.iter().find(|(_, a)| a.idx == 0) else { return vec![] };
        let Some((rb, rs)) = claim(reference) else { return vec![] };
        self.corr
            .clock_summaries()
            .into_iter()
            .filter_map(|s| {
                let (b, src) = claim(&s.capture)?;
                // the line now against the claims now: the last fit's own error bar (a step earlier in
                // the run, with its wide bar, says nothing of where the clocks are now)
                let o = s.last_offset_ns?;
                let u = s.last_uncertainty_ns.unwrap_or(s.max_uncertainty_ns);
                Some(ddscope_core::latency::clock::ClaimCheck::new(&s.capture, reference, b, rb, o, u, (&src, &rs)))
            })
            .collect()
    }

    /// Publishes [`metric_families`](Self::metric_families) and `extra` (the HTTP layer's) into the registry
    /// and the clock offsets in use; called every tick.
    pub fn refresh_metrics(&self, extra: Vec<Family>) {
        let Some(e) = self.export.as_deref() else { return };
        let mut fams = self.metric_families();
        fams.extend(extra);
        e.registry().set_families("serve", fams);
        // The offsets given (--offset) and every agent's (0 unless given).
        let mut names: Vec<&String> = self.cfg.offsets.iter().map(|(n, _)| n).chain(self.agents.keys()).collect();
        names.sort();
        names.dedup();
        let offsets: Vec<(String, i64)> = names.into_iter().map(|n| (n.clone(), self.offset_of(n))).collect();
        e.set_clock_offsets(&offsets);
    }

    /// Number of latency series held and evicted so far.
    pub fn series_counts(&self) -> (usize, u64) {
        (self.series.map.len(), self.series.map.evicted())
    }

    /// Everything the dashboard shows, as one JSON document of bounded size
    /// (see [`StateCaps`](crate::server::config::StateCaps)); `server` is the HTTP layer's counters and
    /// `rate_limited` the refusals per agent name.
    /// The latest rows' timeline between `from` and `to` (ns since 1970; docs/timeline.md).
    pub fn timeline(&self, out: &mut dyn std::io::Write, from: i64, to: i64) -> std::io::Result<ddscope_core::timeline::TimelineStats> {
        self.timeline.write_between(out, from, to)
    }

    pub fn state(&self, server: ServerCounters, rate_limited: &dyn Fn(&str) -> u64) -> Value {
        let caps = &self.cfg.caps;
        let claims = self.clock_claims();
        let mut warnings = self.corr.warnings();
        warnings.extend(claims.iter().filter(|c| c.contradicted).map(|c| c.line.clone()));
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let mut summaries = self.corr.summaries();
        // Each flow's message-latency CDF over the run (its whole distribution, as `report` draws it).
        let dists: BTreeMap<(String, String, String), &ddscope_core::latency::stats::Dist> = summaries
            .iter()
            .zip(self.corr.flows())
            .filter_map(|(f, (_, st))| st.layers.get(&ddscope_core::latency::Layer::Message).map(|d| ((f.topic.clone(), f.sender.clone(), f.receiver.clone()), d)))
            .collect();
        let flows_total = summaries.len();
        // The flows with the most samples; ties in topic order (the summaries' order).
        summaries.sort_by(|a, b| b.samples.cmp(&a.samples));
        summaries.truncate(caps.state_flows);
        summaries.sort_by(|a, b| (&a.topic, &a.sender, &a.receiver).cmp(&(&b.topic, &b.sender, &b.receiver)));
        let pair = |(t, v): (f64, f64)| json!([t, v]);
        let flows: Vec<Value> = summaries
            .into_iter()
            .map(|f| {
                let key = (f.topic.clone(), f.sender.clone(), f.receiver.clone());
                let s = self.series.map.get(&key);
                let pts = |q: Option<&VecDeque<(f64, f64)>>| q.map(|q| thin(q, caps.state_points, pair)).unwrap_or_default();
                let seconds = s.map(|s| s.seconds()).unwrap_or_default();
                // only for the flows shown
                let cdf = dists.get(&key).map(|d| d.cdf(50).into_iter().map(|(v, q)| json!([v, q])).collect::<Vec<_>>()).unwrap_or_default();
                json!({
                    "summary": f,
                    // per second of sample time: [start s, p50 ms, p99 ms, samples]
                    "seconds": seconds.iter().rev().take(caps.state_points).rev().map(|(t, a, b, n)| json!([t, a, b, n])).collect::<Vec<_>>(),
                    "cdf": cdf,
                    "message": pts(s.map(|s| &s.message)),
                    "submessage": pts(s.map(|s| &s.submessage)),
                    "size": pts(s.map(|s| &s.size)),
                })
            })
            .collect();
        let agents: Vec<Value> = self
            .agents
            .iter()
            .map(|(n, a)| {
                json!({
                    "name": n,
                    "last_seen_s": a.last_seen.elapsed().as_secs_f64(),
                    "running": !a.ended,
                    "trace_items": a.trace_items,
                    "late_sightings": a.late_sightings + a.hold.stats.late_sightings,
                    "otlp_held_now": a.hold.len(),
                    "otlp_hold": a.hold.stats.to_json(),
                    "batches": a.batches,
                    "items": a.items,
                    "lost_batches": a.seq_gaps,
                    "dropped_items": a.dropped_items,
                    "rate_limited": rate_limited(n),
                    "counters": a.counters,
                    "topics": a.topics,
                    "topic_rows_sent": a.topic_rows_sent,
                    "devices_refused": a.system.devices_refused,
                    "cpu": thin(&a.system.cpu, caps.state_points, pair),
                    "memory_mb": thin(&a.system.mem, caps.state_points, pair),
                    "network": a.system.net.iter().map(|(d, q)| json!({
                        "device": d,
                        "rx": thin(q, caps.state_points, |(t, rx, _)| json!([t, rx])),
                        "tx": thin(q, caps.state_points, |(t, _, tx)| json!([t, tx])),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let mut writers = self.corr.writer_roles();
        let writers_total = writers.len();
        writers.truncate(caps.state_writers);
        let (ps, pf) = self.corr.pending();
        json!({
            "now": now,
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "window_s": self.cfg.window_ns as f64 / 1e9,
            "agents": agents,
            "flows": flows,
            "writers": writers,
            "correlation": self.corr.stats,
            "clocks": self.corr.clock_summaries(),
            "correlation_evicted": self.corr.stats.problem_line(),
            "pending": {"samples": ps, "submessages": pf},
            "warnings": warnings,
            "clock_claims": claims,
            "incidents": self.incidents.json(caps.state_incidents),
            "ros2": {
                "join": self.corr.join_stats(),
                "chains": self.corr.chains().map(|c| {
                    let mut paths = c.paths();
                    let total = paths.len();
                    paths.truncate(caps.state_chains);
                    json!({"paths": paths, "paths_total": total, "chain": c.summary(), "stats": c.stats})
                }),
            },
            "rejected_batches": self.rejected,
            "bad_items": self.bad_items,
            "otlp_hold": {
                "hold_s": self.cfg.otlp_hold.as_secs_f64(),
                "max_held_per_agent": self.cfg.otlp_hold_max,
                "held_now": self.agents.values().map(|a| a.hold.len()).sum::<usize>(),
                "lost_keys_forgotten": self.series.lost.evicted(),
                "totals": self.hold_stats().to_json(),
            },
            "limits": {
                "agents": self.agents.len(),
                "max_agents": MAX_AGENTS,
                "agents_evicted": self.agents_evicted,
                "agents_refused": self.agents_refused,
                "flows_total": flows_total,
                "flows_shown": flows.len(),
                "writers_total": writers_total,
                "writers_shown": writers.len(),
                "series": self.series.map.len(),
                "max_series": self.series.map.max_entries(),
                "series_evicted": self.series.map.evicted(),
                "percentile_rows_late": self.series.percentiles.rows_late,
                "percentile_rows_sampled": self.series.percentiles.rows_sampled,
                "topic_rows_truncated": self.topic_rows_truncated,
                "oversized_documents": self.oversized_documents,
                "stream_topics_evicted": self.decoder.evicted().0,
                "stream_writers_evicted": self.decoder.evicted().1,
                "stream_names_cut": self.decoder.names_cut + self.devices_cut(),
                "stream_name_bytes": self.decoder.bytes().0 + self.decoder.bytes().2,
                "stream_writer_bytes": self.decoder.bytes().1,
            },
            "server": server,
        })
    }
}

/// Whether a sighting comes after its time was judged (over OTLP: the traces
/// pipeline fell behind the broadcast watermarks by more than the window and
/// the hold; over either stream: its agent fell silent for `--idle` and was
/// judged without): its sample is no longer waiting and its time has passed,
/// or its sample was judged lost toward this agent lately.
/// Fed anyway it would be judged as a sample of its own; it is counted instead.
fn late(corr: &Correlator, series: &SeriesStore, idx: usize, agent: &Arc<str>, item: &ddscope_core::latency::Item) -> bool {
    use ddscope_core::latency::Item;
    match item {
        Item::Sample(r) if !r.is_supplement() => {
            corr.is_late(idx, item) || series.lost.contains_key(&(r.writer_id, r.sn, agent.clone()))
        }
        Item::Frag(_) => corr.is_late(idx, item),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn per_second_percentiles_are_exact_then_sampled_and_close_in_order() {
        let (mut f, mut st) = (super::FlowSeries::default(), super::PercentileStats::default());
        // second 10: 1..=100 µs, exact (nearest rank: p50 = 50 µs, p99 = 99 µs)
        for v in 1..=100i64 {
            f.add_second(10_000_000_000 + v, v * 1000, 100, &mut st);
        }
        assert_eq!(f.seconds(), vec![(10, 0.05, 0.099, 100)]);
        // second 11: 10 000 values 1..=10 000 µs, a uniform sample of 2 000 kept: the percentiles within 5 %
        for v in 1..=10_000i64 {
            f.add_second(11_000_000_000 + v, v * 1000, 100, &mut st);
        }
        assert_eq!(st.rows_sampled, 8_000);
        let s11 = f.seconds()[1];
        assert_eq!((s11.0, s11.3), (11, 10_000));
        assert!((s11.1 - 5.0).abs() < 0.25 && (s11.2 - 9.9).abs() < 0.25, "{s11:?}");
        // 8 seconds later second 10 closes; a row of it afterwards is late, not counted in
        f.add_second(19_000_000_000, 1, 100, &mut st);
        assert_eq!(f.secs.front().map(|x| x.0), Some(10));
        f.add_second(10_500_000_000, 1, 100, &mut st);
        assert_eq!((st.rows_late, f.seconds()[0]), (1, (10, 0.05, 0.099, 100)));
    }

    use super::*;
    use crate::stream::protocol::StreamItem;

    fn row(topic: &str, sender: &str, t: i64) -> LatencyRow {
        use ddscope_core::discovery::TopicNames;
        LatencyRow {
            sample_size: Some(10),
            latency_ns: Some(1000),
            ..LatencyRow::new(
                Level::Message,
                Some(Arc::new(TopicNames::new(&format!("rt{topic}"), "T"))),
                ddscope_wire::Guid::parse_hex("0110aaaa010203040506070800001203").unwrap(),
                1,
                Arc::from(sender),
                Arc::from("rx"),
                ddscope_core::latency::Status::Delivered,
                t,
            )
        }
    }

    #[test]
    fn series_are_capped_least_recently_updated_first() {
        let mut s = SeriesStore::new(3, 5, ddscope_core::limits::StreamCaps::default().max_lost_keys);
        for (i, t) in ["/a", "/b", "/c"].iter().enumerate() {
            s.on_row(row(t, "tx", i as i64));
        }
        s.on_row(row("/a", "tx", 10)); // /a is now the most recent
        s.on_row(row("/d", "tx", 11)); // evicts /b, the least recently updated
        let mut keys: Vec<_> = s.map.keys().map(|k| k.0.clone()).collect();
        keys.sort();
        assert_eq!(keys, ["/a", "/c", "/d"]);
        assert_eq!(s.map.evicted(), 1);
        assert_eq!(s.map.iter_lru().count(), 3, "the recency order follows the map");
        for i in 0..20 {
            s.on_row(row("/a", "tx", 100 + i));
        }
        assert_eq!(s.map[&("/a".to_string(), "tx".to_string(), "rx".to_string())].message.len(), 5, "points per series are capped");
    }

    #[test]
    fn thinning_keeps_the_newest_point() {
        let q: VecDeque<(f64, f64)> = (0..1000).map(|i| (i as f64, 0.0)).collect();
        let v = thin(&q, 100, |(t, v)| json!([t, v]));
        assert!(v.len() <= 100, "{}", v.len());
        assert_eq!(v.last().unwrap()[0], 999.0);
        assert_eq!(thin(&q, 2000, |(t, v)| json!([t, v])).len(), 1000);
    }

    fn sighting(agent: &str, seq: u64, sn: i64, t: i64) -> Batch {
        let s = protocol::StreamSample {
            w: "0110aaaa010203040506070800001203".into(),
            sn,
            topic: Some(("rt/chatter".into(), "std_msgs::msg::dds_::String_".into())),
            tt: 1,
            first: t,
            first_ip: t,
            last: t,
            complete: true,
            size: 100,
            fsize: None,
            fexp: 0,
            fseen: 0,
            ipf: 1,
            retx: 0,
            retx_bytes: 0,
            pcp: None,
            vendor: 0x0110,
            supp: 0,
            sts: None,
            z: None,
        };
        Batch { agent: agent.into(), seq, sent_ns: 0, items: vec![StreamItem::Sample(s)], dropped_items: 0, topics: None, system: vec![], counters: None, last: false }
    }

    fn record(agent: &str, seq: u64, wm: i64) -> Batch {
        Batch { agent: agent.into(), seq, sent_ns: 0, items: vec![StreamItem::Watermark { t: wm }], dropped_items: 0, topics: None, system: vec![], counters: None, last: false }
    }

    /// One shard fed in the order a lagging traces pipeline delivers: pc2's sighting of sample 1 comes after
    /// both agents' records that carry their watermarks past it by more than the window.
    /// Oracle: the samples the test sent — 3 judged, all delivered (pc1 and pc2 both saw them); without the
    /// hold sample 1 is a false loss and pc2's late sighting is counted.
    fn lagging_shard(hold: Duration) -> (u64, u64, Value) {
        const S: i64 = 1_000_000_000;
        let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.window_ns = S;
        cfg.otlp_hold = hold;
        let mut c = Central::new(cfg);
        let mut feed = |b: Batch, record: bool| c.ingest_otlp(b, record).unwrap();
        feed(sighting("pc1", 1, 0, S), false);
        feed(sighting("pc2", 1, 0, S + 1_000_000), false);
        feed(record("pc1", 1, S), true);
        feed(record("pc2", 1, S), true);
        feed(sighting("pc1", 2, 1, 2 * S), false);
        for (k, wm) in [(2, 2 * S), (3, 5 * S)] {
            feed(record("pc1", k, wm), true);
            feed(record("pc2", k, wm), true);
        }
        feed(sighting("pc2", 2, 1, 2 * S + 1_000_000), false); // the laggard
        feed(sighting("pc1", 4, 2, 5 * S + S / 2), false);
        feed(sighting("pc2", 4, 2, 5 * S + S / 2 + 1_000_000), false);
        feed(record("pc1", 4, 9 * S), true);
        feed(record("pc2", 4, 9 * S), true);
        feed(sighting("pc1", 5, 3, 9 * S + S / 2), false);
        feed(sighting("pc2", 5, 3, 9 * S + S / 2 + 1_000_000), false);
        let st = c.state(json!({}), &|_| 0);
        let f = c.corr.summaries().into_iter().find(|f| f.sender == "pc1" && f.receiver == "pc2").expect("the flow");
        (f.delivered, f.lost, st)
    }

    #[test]
    fn the_hold_keeps_a_lagging_traces_pipeline_from_causing_false_losses() {
        let (delivered, lost, st) = lagging_shard(Duration::from_secs(600));
        assert_eq!((delivered, lost), (3, 0), "{}", st["otlp_hold"]);
        let t = &st["otlp_hold"]["totals"];
        assert_eq!(t["late_sightings"], 0);
        assert!(t["released_by_spans"].as_u64().unwrap() >= 6, "{t}");
        assert_eq!(t["released_by_time"], 0, "{t}");
        assert_eq!(st["otlp_hold"]["held_now"], 0, "batch 5's sightings released batch 4's records");
        assert!(t["skew"]["batches"].as_u64().unwrap() >= 4, "{t}");
        // The hold off: sample 1 is judged before pc2's sighting is in (a false loss), and that sighting is counted.
        let (delivered, lost, st) = lagging_shard(Duration::ZERO);
        assert_eq!((delivered, lost), (2, 1));
        let t = &st["otlp_hold"]["totals"];
        assert_eq!(t["late_sightings"], 1, "{t}");
        assert_eq!(st["agents"][1]["otlp_hold"]["late_sightings"], 1, "counted for the agent whose sighting came late");
        assert_eq!(st["otlp_hold"]["held_now"], 0);
    }

    /// A Zenoh sighting of sample `sn` as an agent streams it: (sending session, receiving session) keys.
    fn zenoh_sighting(agent: &str, seq: u64, sn: i64, first: i64, last: i64, z: (u64, u64), wm: i64) -> Batch {
        let s = protocol::StreamSample {
            w: "0110aaaa010203040506070800001203".into(),
            sn,
            topic: Some(("0/image/sensor_msgs::msg::dds_::Image_/RIHS01_00".into(), "sensor_msgs::msg::dds_::Image_".into())),
            tt: 1,
            first,
            first_ip: first,
            last,
            complete: true,
            size: 100_000,
            fsize: None,
            fexp: 1,
            fseen: 1,
            ipf: 1,
            retx: 0,
            retx_bytes: 0,
            pcp: None,
            vendor: 0,
            supp: 0,
            sts: None,
            z: Some(z),
        };
        let items = vec![StreamItem::Sample(s), StreamItem::Watermark { t: wm }];
        Batch { agent: agent.into(), seq, sent_ns: 0, items, dropped_items: 0, topics: None, system: vec![], counters: None, last: false }
    }

    /// The shape of a loaded lab run (test_lab_zenoh's agents on a Zenoh run): the agent on the router's
    /// link to pc2 falls silent for longer than `--idle` while its sighting of sample 2 waits in its next
    /// batch. serve stops waiting for it, judges sample 2 without it (the router's hop then ends at pc2's
    /// capture), and the sighting arrives after that. Oracle: the sightings the test sent — two samples,
    /// each seen by all four agents; sample 2's sighting at router-pc2 came after its sample was judged.
    /// It must be counted as late for router-pc2 (not fed, which made it a sample of its own that was
    /// judged without its sender and dropped without a trace), and every hop is accounted for.
    #[test]
    fn a_sighting_after_its_agent_fell_silent_is_counted_not_dropped() {
        const S: i64 = 1_000_000_000;
        let (pc1, router, pc2) = (11u64, 22u64, 33u64);
        let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.window_ns = S;
        cfg.idle = Duration::from_millis(200);
        let mut c = Central::new(cfg);
        // (agent, session keys, first, last) of one sample sent at t: pc1 → router → pc2
        let seen = |t: i64| {
            [
                ("pc1", (pc1, router), t, t + 100_000),
                ("router-pc1", (pc1, router), t + 5_000, t + 105_000),
                ("router-pc2", (router, pc2), t + 200_000, t + 300_000),
                ("pc2", (router, pc2), t + 205_000, t + 305_000),
            ]
        };
        for (a, z, first, last) in seen(S) {
            c.ingest(zenoh_sighting(a, 1, 1, first, last, z, S + S / 2)).unwrap();
        }
        // Sample 2: router-pc2's sighting is held back (its agent is silent).
        let [s1, s2, held, s4] = seen(2 * S);
        for (a, z, first, last) in [s1, s2, s4] {
            c.ingest(zenoh_sighting(a, 2, 2, first, last, z, 2 * S + S / 2)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(300));
        for a in ["pc1", "router-pc1", "pc2"] {
            c.ingest(record(a, 3, 2 * S + S / 2)).unwrap();
        }
        c.tick(); // router-pc2: silent for longer than --idle
        for a in ["pc1", "router-pc1", "pc2"] {
            c.ingest(record(a, 4, 4 * S)).unwrap(); // sample 2 is judged without router-pc2
        }
        let (a, z, first, last) = held;
        c.ingest(zenoh_sighting(a, 2, 2, first, last, z, 4 * S)).unwrap();
        for (k, a) in ["pc1", "router-pc1", "pc2", "router-pc2"].iter().enumerate() {
            c.ingest(Batch { last: true, ..record(a, 5 + k as u64, 5 * S) }).unwrap();
        }
        let st = c.state(json!({}), &|_| 0);
        let agent = |n: &str| st["agents"].as_array().unwrap().iter().find(|a| a["name"] == n).unwrap().clone();
        assert_eq!(agent("router-pc2")["late_sightings"], 1, "{}", agent("router-pc2"));
        for a in ["pc1", "router-pc1", "pc2"] {
            assert_eq!(agent(a)["late_sightings"], 0, "{a}");
        }
        assert_eq!(st["correlation"]["samples_judged"], 2, "the late sighting is not judged as a sample of its own: {}", st["correlation"]);
        let flows = c.corr.summaries();
        let hops = |s: &str, r: &str| {
            flows.iter().find(|f| f.sender == s && f.receiver == r).and_then(|f| f.layers.iter().find(|(l, _)| *l == ddscope_core::latency::Layer::Router)).map_or(0, |(_, d)| d.count)
        };
        assert_eq!((hops("router-pc1", "router-pc2"), hops("router-pc1", "pc2")), (1, 1), "{flows:?}");
        let m = flows.iter().find(|f| f.sender == "pc1" && f.receiver == "pc2").expect("pc1 → pc2");
        assert_eq!((m.delivered, m.lost), (2, 0));
    }

    /// Oracle: the agents the test sent. 64 junk names fill the table; once they are idle a new agent
    /// takes the slot of the one idle longest (counted), and its samples are correlated under its own
    /// name with another agent's — nothing of the evicted agent remains in the flows.
    #[test]
    fn idle_agents_make_room_for_new_ones() {
        let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.window_ns = 1_000_000;
        cfg.idle = Duration::from_millis(50);
        let mut c = Central::new(cfg);
        for i in 0..MAX_AGENTS {
            c.ingest(sighting(&format!("junk{i:02}"), 1, i as i64, 1_000)).unwrap();
        }
        let e = c.ingest(record("pc1", 1, 0)).unwrap_err();
        assert!(e.contains("none is idle"), "{e}");
        std::thread::sleep(Duration::from_millis(80));
        c.tick();
        // Two newcomers: each evicts one idle junk agent (the one silent longest first).
        c.ingest(sighting("pc1", 1, 100, 2_000_000_000)).unwrap();
        c.ingest(sighting("pc2", 1, 100, 2_001_000_000)).unwrap();
        c.ingest(record("pc1", 2, 9_000_000_000)).unwrap();
        c.ingest(record("pc2", 2, 9_000_000_000)).unwrap();
        let st = c.state(json!({}), &|_| 0);
        let l = &st["limits"];
        assert_eq!((l["agents"].as_u64(), l["agents_evicted"].as_u64(), l["agents_refused"].as_u64()), (Some(64), Some(2), Some(1)), "{l}");
        let names: Vec<&str> = st["agents"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"pc1") && names.contains(&"pc2") && !names.contains(&"junk00") && !names.contains(&"junk01"), "{names:?}");
        let flows = c.corr.summaries();
        let f = flows.iter().find(|f| f.sender == "pc1" && f.receiver == "pc2").expect("pc1 → pc2");
        assert_eq!((f.delivered, f.lost), (1, 0));
        assert!(flows.iter().all(|f| !f.sender.starts_with("junk") && !f.receiver.starts_with("junk")), "{flows:?}");
        assert_eq!(st["correlation"]["captures_replaced"], 2);
        // A running agent is never evicted: with every other slot busy, a third newcomer is refused.
        for i in 2..MAX_AGENTS {
            c.ingest(sighting(&format!("busy{i:02}"), 1, 1000 + i as i64, 3_000_000_000)).unwrap_or_else(|e| panic!("{i}: {e}"));
        }
        assert!(c.ingest(record("late", 1, 0)).unwrap_err().contains("none is idle"));
    }

    #[test]
    fn agent_documents_are_capped_and_names_checked() {
        let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.caps.agent_topic_rows = 2;
        cfg.caps.agent_json_bytes = 1000;
        let mut c = Central::new(cfg);
        let batch = |topics: Value, counters: Value| Batch {
            agent: "pc1".into(),
            seq: 1,
            sent_ns: 0,
            items: vec![StreamItem::Watermark { t: 1 }],
            dropped_items: 0,
            topics: Some(topics),
            system: vec![],
            counters: Some(counters),
            last: false,
        };
        c.ingest(batch(json!([{"topic_name": "a"}, {"topic_name": "b"}, {"topic_name": "c"}]), json!({"x": "y".repeat(5000)}))).unwrap();
        let s = c.state(json!({}), &|_| 0);
        let a = &s["agents"][0];
        assert_eq!(a["topics"].as_array().unwrap().len(), 2);
        assert_eq!(a["topic_rows_sent"], 3);
        assert!(a["counters"]["note"].as_str().unwrap().contains("not kept"), "{}", a["counters"]);
        assert_eq!(s["limits"]["topic_rows_truncated"], 1);
        assert_eq!(s["limits"]["oversized_documents"], 1);
        let mut b = batch(json!([]), json!({}));
        b.agent = "x".repeat(65);
        assert!(c.ingest(b).unwrap_err().contains("1 to 64"));
        assert!(check_agent_name("a\u{7}b").is_err());
        assert!(check_agent_name(&"é".repeat(64)).is_ok(), "characters, not bytes");
    }

    /// What serve correlates reaches /metrics. Oracle: the sightings the test sent — sn 1..5 seen by pc1 at
    /// k s and by pc2 1 ms later (sn 5: 3 ms), sn 6 by pc1 only; with pc2's clock 1 ms ahead (--offset
    /// pc2=+1ms) the latencies are 0, 0, 0, 0 and 2 ms, sn 6 is lost once the watermarks pass the window.
    #[test]
    fn correlated_rows_reach_the_metrics_with_offsets_and_caps() {
        const S: i64 = 1_000_000_000;
        let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.window_ns = S;
        cfg.offsets = vec![("pc2".into(), 1_000_000)];
        let mut c = Central::new(cfg);
        let mut seq = 0;
        let feed = |c: &mut Central, b: Batch| {
            c.ingest(b).unwrap();
        };
        for sn in 1..=6 {
            seq += 1;
            feed(&mut c, sighting("pc1", seq, sn, sn * S));
            if sn <= 5 {
                feed(&mut c, sighting("pc2", seq, sn, sn * S + if sn == 5 { 3_000_000 } else { 1_000_000 }));
            }
        }
        seq += 1;
        feed(&mut c, record("pc1", seq, 20 * S));
        feed(&mut c, record("pc2", seq, 20 * S));
        c.refresh_metrics(vec![]);
        let reg = c.registry().expect("metrics are on by default");
        let fams = ddscope_sysstat::promtext::parse(&reg.render_current()).unwrap();
        let v = |name: &str, extra: &[(&str, &str)]| {
            fams.iter()
                .flat_map(|f| f.samples.iter())
                .find(|s| {
                    s.name == name
                        && [("topic", "/chatter"), ("sender", "pc1"), ("receiver", "pc2")].iter().chain(extra).all(|(k, v)| s.label(k) == Some(*v))
                })
                .map(|s| s.value)
        };
        assert_eq!(v("ddscope_latency_seconds_count", &[("layer", "message")]), Some(5.0));
        assert!((v("ddscope_latency_seconds_sum", &[("layer", "message")]).unwrap() - 0.002).abs() < 1e-9);
        assert_eq!(v("ddscope_latency_samples_total", &[("status", "delivered")]), Some(5.0));
        assert_eq!(v("ddscope_latency_samples_total", &[("status", "lost")]), Some(1.0));
        let off = fams.iter().flat_map(|f| f.samples.iter()).find(|s| s.name == "ddscope_clock_offset_seconds" && s.label("capture") == Some("pc2"));
        assert_eq!(off.map(|s| s.value), Some(0.001));
        let up = fams.iter().flat_map(|f| f.samples.iter()).filter(|s| s.name == "ddscope_serve_agent_up").count();
        assert_eq!(up, 2, "one ddscope_serve_agent_up per agent");
        // An endpoint's first scrape shows the counts; a label set created after it shows zeros at
        // its next scrape (so rate() counts its first observations), then its counts.
        let count = |text: &str, topic: &str| {
            let fams = ddscope_sysstat::promtext::parse(text).unwrap();
            fams.iter()
                .flat_map(|f| f.samples.iter())
                .find(|s| s.name == "ddscope_latency_seconds_count" && s.label("layer") == Some("message") && s.label("topic") == Some(topic))
                .map(|s| s.value)
        };
        assert_eq!(count(&reg.render(), "/chatter"), Some(5.0));
        assert_eq!(count(&reg.render(), "/chatter"), Some(5.0));

        // A cap of one latency label set: a second topic is refused and counted, not exported.
        let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.window_ns = S;
        cfg.max_export_series = 1;
        let mut c = Central::new(cfg);
        for (i, w) in ["0110aaaa010203040506070800001203", "0110aaaa010203040506070800001303"].iter().enumerate() {
            for (agent, dt) in [("pc1", 0), ("pc2", 1_000_000)] {
                let mut b = sighting(agent, i as u64 + 1, 1, S + dt);
                if let StreamItem::Sample(s) = &mut b.items[0] {
                    s.w = w.to_string();
                    s.topic = Some((format!("rt/t{i}"), "T".into()));
                }
                c.ingest(b).unwrap();
            }
        }
        c.ingest(record("pc1", 3, 20 * S)).unwrap();
        c.ingest(record("pc2", 3, 20 * S)).unwrap();
        let text = c.registry().unwrap().render_current();
        assert!(text.contains("ddscope_export_dropped_series_total{kind=\"latency\"} 1"), "{text}");
        assert!(text.contains("topic=\"/t0\"") != text.contains("topic=\"/t1\""), "exactly one of the topics is exported");
    }

    /// Shards (docs/scale-out.md: the Collector routes each sample's sightings to one shard, every agent's
    /// records to all) export histograms and counters that add up to one serve's. Oracle: one Central fed
    /// everything, against two fed the even and the odd sequence numbers; sn 1..40 with latencies 0.5..20 ms,
    /// every 7th lost.
    #[test]
    fn shards_latency_families_sum_to_one_serves() {
        const S: i64 = 1_000_000_000;
        let central = || {
            let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
            cfg.window_ns = S;
            Central::new(cfg)
        };
        let (mut one, mut s0, mut s1) = (central(), central(), central());
        let mut seq = 0;
        for sn in 1..=40i64 {
            seq += 1;
            let t = sn * 100_000_000;
            let feed = |c: &mut Central| {
                c.ingest(sighting("pc1", seq, sn, t)).unwrap();
                if sn % 7 != 0 {
                    c.ingest(sighting("pc2", seq, sn, t + sn * 500_000)).unwrap();
                }
            };
            feed(&mut one);
            feed(if sn % 2 == 0 { &mut s0 } else { &mut s1 });
            // Records (watermarks) go to every shard.
            if sn % 10 == 0 {
                seq += 1;
                for c in [&mut one, &mut s0, &mut s1] {
                    c.ingest(record("pc1", seq, t)).unwrap();
                    c.ingest(record("pc2", seq, t)).unwrap();
                }
            }
        }
        for c in [&mut one, &mut s0, &mut s1] {
            c.ingest(record("pc1", seq + 1, 100 * S)).unwrap();
            c.ingest(record("pc2", seq + 1, 100 * S)).unwrap();
        }
        let values = |c: &Central| -> std::collections::BTreeMap<String, f64> {
            let text = c.registry().unwrap().render_current();
            ddscope_sysstat::promtext::parse(&text)
                .unwrap()
                .into_iter()
                .flat_map(|f| f.samples)
                // Jitter is between the consecutive samples one serve judges, so a shard's is over other pairs:
                // it does not sum (docs/export.md); the timing counters are checked below.
                .filter(|s| s.name.starts_with("ddscope_latency_") && !s.name.starts_with("ddscope_latency_jitter") && !s.name.starts_with("ddscope_latency_timing"))
                .map(|s| (format!("{}{:?}", s.name, s.labels), s.value))
                .collect()
        };
        let (all, a, b) = (values(&one), values(&s0), values(&s1));
        assert!(all.keys().any(|k| k.starts_with("ddscope_latency_seconds_bucket")), "{all:?}");
        assert_eq!(all.iter().find(|(k, _)| k.starts_with("ddscope_latency_samples_total") && k.contains("\"lost\"")).map(|(_, v)| *v), Some(5.0));
        for (k, v) in &all {
            let sum = a.get(k).unwrap_or(&0.0) + b.get(k).unwrap_or(&0.0);
            assert!((sum - v).abs() < 1e-9, "{k}: one serve {v}, shards {sum}");
        }
        for k in a.keys().chain(b.keys()) {
            assert!(all.contains_key(k), "{k} only on a shard");
        }
        // In time / late: each shard infers the publication period from the samples it judges (sn two apart),
        // so it classifies all but its first three; one serve all but its first three.
        let timing = |c: &Central, t: &str| -> f64 {
            let text = c.registry().unwrap().render_current();
            ddscope_sysstat::promtext::parse(&text).unwrap().into_iter().flat_map(|f| f.samples).filter(|s| s.name == "ddscope_latency_timing_total" && s.label("timing") == Some(t)).map(|s| s.value).sum()
        };
        let delivered = 40.0 - 5.0;
        assert_eq!(timing(&one, "in_time") + timing(&one, "late"), delivered - 3.0);
        let sharded = timing(&s0, "in_time") + timing(&s0, "late") + timing(&s1, "in_time") + timing(&s1, "late");
        assert!((delivered - 8.0..=delivered - 6.0).contains(&sharded), "{sharded}");
        assert_eq!(timing(&s0, "late") + timing(&s1, "late"), timing(&one, "late"));
    }
}
