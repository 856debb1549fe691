//! One distributed trace per DDS sample, from what `ddscope serve` correlates
//! (docs/export.md, "Traces: one per sample").
//!
//! The trace id is derived from the sample's identity — FNV-1a over (writer
//! GUID, sequence number), [`crate::ids::sample_trace_id`], the same
//! function the agents' per-submessage spans and the scale-out sightings
//! use — and every span id from (trace id, span name, host), so the spans of
//! one sample made at different times (one correlated row per receiver; the
//! chain hops windows later), on different `serve` shards or by an agent all
//! join in one trace without any context in the payload:
//!
//! ```text
//! publish /image                 (sender host; rclcpp_publish, or INFO_TS, → first on the wire)
//! ├─ ros_publish                 rclcpp_publish → rmw_publish
//! ├─ dds_send                    rmw_publish → first on the wire   (without a trace: source_ts_to_wire)
//! ├─ receive /image              (one per receiver host; first on the wire → callback_end)
//! │  ├─ message                  first on the wire → sample complete at the receiver (the wire)
//! │  ├─ dds_receive              complete at the receiver → rmw_take
//! │  ├─ executor                 rmw_take → callback_start
//! │  └─ callback                 callback_start → callback_end
//! └─ node /relay                 (chains) the relay's callback_start of its input → this publish,
//!                                linked to the input sample's trace (its callback span)
//! ```
//!
//! Same-host and trace-to-trace deliveries have `dds_local` / `dds_remote`
//! (rmw_publish → rmw_take) instead of the wire spans. Sampling keeps every
//! sample, every N-th sequence number, or only the deliveries that were
//! late, lost (or incomplete) or over a budget; what is left out is counted.

use crate::budget::{row_topic, Budgets};
use crate::ids::sample_trace_id;
use ddscope_core::latency::explain::Incident;
use ddscope_core::latency::{LatencyRow, Level, Status, Timing};
use ddscope_core::ros2::chain::ChainRow;
use ddscope_wire::Guid;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span, span::SpanKind, status, Span, Status as SpanStatus};
use ddscope_core::bounded::BoundedMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Which samples get a trace. The criteria add up (a sample meeting any one is kept).
#[derive(Debug, Clone)]
pub struct TraceSampling {
    pub all: bool,
    /// Every N-th sequence number of each writer (sn % N == 0): the same samples on every shard.
    pub every: Option<u64>,
    /// Deliveries late against the publication period (Kouril et al.).
    pub late: bool,
    /// Deliveries lost or incomplete.
    pub lost: bool,
    /// Deliveries with a layer over its topic's budget.
    pub over_budget: bool,
    pub budgets: Budgets,
    /// Samples whose spans were made, remembered to add later receivers and
    /// chain spans to them; beyond it the oldest are forgotten (counted).
    /// `serve` sets it from `stream.max_traced_samples` (`ddscope limits`).
    pub max_remembered: usize,
}

impl Default for TraceSampling {
    fn default() -> Self {
        TraceSampling { all: true, every: None, late: false, lost: false, over_budget: false, budgets: Budgets::default(), max_remembered: ddscope_core::limits::StreamCaps::default().max_traced_samples }
    }
}

impl FromStr for TraceSampling {
    type Err = String;
    /// `all`, `none`, or a comma-separated union of `every=N`, `late`, `lost`, `over-budget`.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut t = TraceSampling { all: false, ..TraceSampling::default() };
        for part in s.split(',').map(str::trim) {
            match part {
                "all" => t.all = true,
                "none" => {}
                "late" => t.late = true,
                "lost" => t.lost = true,
                "over-budget" => t.over_budget = true,
                p => match p.strip_prefix("every=").map(str::parse::<u64>) {
                    Some(Ok(n)) if n >= 1 => t.every = Some(n),
                    _ => return Err(format!("{p:?}: expected all, none, every=N (N ≥ 1), late, lost or over-budget (comma-separated)")),
                },
            }
        }
        Ok(t)
    }
}

impl TraceSampling {
    /// Whether the delivery of `row` (a message-level row) gets its spans.
    fn keeps(&self, topic: &str, r: &LatencyRow) -> bool {
        self.all
            || self.every.is_some_and(|n| r.sn > 0 && r.sn as u64 % n == 0)
            || (self.lost && (r.status == Status::Lost || r.status == Status::Incomplete))
            || (self.late && r.timing == Some(Timing::Late))
            || (self.over_budget && self.budgets.row_over(topic, r))
    }
}

/// What the tracer made and left out (`ddscope_trace_export_total{what}`).
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Samples with a trace (their publish span made).
    pub samples: AtomicU64,
    /// Deliveries (a sample at one receiver) with spans, and left out by sampling.
    pub deliveries: AtomicU64,
    pub deliveries_left_out: AtomicU64,
    pub spans: AtomicU64,
    /// Chain spans made, and left out because the chain's output sample has no trace (sampled out or forgotten).
    pub chain_spans: AtomicU64,
    pub chain_spans_left_out: AtomicU64,
    /// Samples forgotten to stay within `max_remembered` (a later receiver of one gets its spans without a publish span).
    pub remembered_evicted: AtomicU64,
}

impl TraceStats {
    pub fn pairs(&self) -> [(&'static str, u64); 7] {
        let g = |a: &AtomicU64| a.load(Relaxed);
        [
            ("samples", g(&self.samples)),
            ("deliveries", g(&self.deliveries)),
            ("deliveries_left_out", g(&self.deliveries_left_out)),
            ("spans", g(&self.spans)),
            ("chain_spans", g(&self.chain_spans)),
            ("chain_spans_left_out", g(&self.chain_spans_left_out)),
            ("remembered_evicted", g(&self.remembered_evicted)),
        ]
    }
}

/// A span and the host (capture point) whose resource it belongs to.
pub type HostSpan = (Arc<str>, Span);

/// A sample: (writer, sn), or for a trace-to-trace delivery without a known
/// sequence number (writer, publish time) with the top bit set.
type SampleKey = (Guid, i64);

/// The previous hop of the chain instance being emitted.
struct ChainHop {
    chain: Arc<str>,
    instance: u64,
    trace: [u8; 16],
    publish: [u8; 8],
    receiver: Arc<str>,
    callback_start: Option<i64>,
    rclcpp: Option<i64>,
}

/// Builds the spans of one trace per sample from correlated rows.
pub struct SampleTracer {
    cfg: TraceSampling,
    /// Oldest first; the oldest is forgotten to stay within `max_remembered`.
    remembered: BoundedMap<SampleKey, ()>,
    /// Hops of the chain instance being emitted (in hop order).
    instance: Vec<ChainHop>,
    pub stats: Arc<TraceStats>,
}

/// FNV-1a, 64 bit (as the trace ids): every `serve` computes the same span ids.
fn fnv1a(seed: u64, parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for p in parts {
        for b in *p {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The span id of span `name` of `host` in trace `trace`: the same wherever it is computed.
pub fn span_id(trace: &[u8; 16], name: &str, host: &str) -> [u8; 8] {
    let mut id = fnv1a(5, &[trace, name.as_bytes(), host.as_bytes()]).to_be_bytes();
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

/// The trace id of a row's sample: (writer, sn) as for the wire; a
/// trace-to-trace delivery whose sequence number no capture or publish order
/// gave (sn 0) by (writer, its publish time) instead.
fn trace_of(r: &LatencyRow) -> ([u8; 16], SampleKey) {
    if r.sn > 0 {
        return (sample_trace_id(&r.writer_id, r.sn), (r.writer_id, r.sn));
    }
    let at = r.source_ts_ns.unwrap_or(r.sender_first_ts_ns);
    let mut id = [0u8; 16];
    let w = r.writer_id.to_bytes();
    id[..8].copy_from_slice(&fnv1a(6, &[&w, &at.to_be_bytes()]).to_be_bytes());
    id[8..].copy_from_slice(&fnv1a(7, &[&w, &at.to_be_bytes()]).to_be_bytes());
    (id, (r.writer_id, at | i64::MIN))
}

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue { key: key.to_string(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
}
fn kv_str(key: &str, v: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.to_string()))
}
fn kv_int(key: &str, v: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(v))
}

struct SpanArgs<'a> {
    trace: &'a [u8; 16],
    name: String,
    host: &'a str,
    parent: Option<[u8; 8]>,
    kind: SpanKind,
    start: i64,
    end: i64,
}

/// A span from `start` to `end` (an end before the start, from a clock offset, is shown as
/// zero long; its attribute `ddscope.latency_ns` keeps the signed value).
fn make(a: SpanArgs<'_>, mut attrs: Vec<KeyValue>) -> Span {
    let id = span_id(a.trace, &a.name, a.host);
    attrs.push(kv_int("ddscope.latency_ns", a.end.saturating_sub(a.start)));
    Span {
        trace_id: a.trace.to_vec(),
        span_id: id.to_vec(),
        parent_span_id: a.parent.map(|p| p.to_vec()).unwrap_or_default(),
        name: a.name,
        kind: a.kind as i32,
        start_time_unix_nano: a.start.max(0) as u64,
        end_time_unix_nano: a.end.max(a.start).max(0) as u64,
        attributes: attrs,
        ..Default::default()
    }
}

fn error(mut s: Span, msg: &str) -> Span {
    s.status = Some(SpanStatus { code: status::StatusCode::Error as i32, message: msg.to_string() });
    s
}

impl SampleTracer {
    pub fn new(cfg: TraceSampling) -> Self {
        let remembered = BoundedMap::new(cfg.max_remembered.max(1));
        SampleTracer { cfg, remembered, instance: vec![], stats: Arc::new(TraceStats::default()) }
    }

    /// Remembers a sample with spans; false if it was already remembered.
    fn remember(&mut self, k: SampleKey) -> bool {
        if self.remembered.contains_key(&k) {
            return false;
        }
        let stats = &self.stats;
        self.remembered.insert(k, (), &mut |_, _| {
            stats.remembered_evicted.fetch_add(1, Relaxed);
        });
        true
    }

    /// The spans of one correlated delivery (a message-level row): the
    /// sample's publish spans with its first delivery kept, then this
    /// receiver's. Submessage rows make no spans (the agents' per-submessage
    /// spans carry the same trace id).
    pub fn on_row(&mut self, r: &LatencyRow, out: &mut Vec<HostSpan>) {
        if r.level != Level::Message {
            return;
        }
        let topic = row_topic(r);
        if !self.cfg.keeps(&topic, r) {
            self.stats.deliveries_left_out.fetch_add(1, Relaxed);
            return;
        }
        let before = out.len();
        let (trace, key) = trace_of(r);
        let ros = r.ros.as_deref();
        let wire = r.status == Status::Delivered || r.status == Status::Lost || r.status == Status::Incomplete;
        let rclcpp = ros.and_then(|c| c.rclcpp_publish_ts_ns);
        let rmw = ros.and_then(|c| c.rmw_publish_ts_ns);
        let first_wire = r.sender_first_ts_ns;
        let sender: Arc<str> = r.sender.clone();
        let receiver: Arc<str> = r.receiver.clone();
        let publish_name = format!("publish {topic}");
        let publish_id = span_id(&trace, &publish_name, &sender);
        let common = |layer: &str| -> Vec<KeyValue> {
            let mut a = vec![kv_str("dds.topic", &topic), kv_str("dds.writer_guid", &r.writer_id.to_string()), kv_str("ddscope.layer", layer)];
            if r.sn > 0 {
                a.push(kv_int("dds.sn", r.sn));
            }
            a
        };
        if self.remember(key) {
            self.stats.samples.fetch_add(1, Relaxed);
            // The publish: from rclcpp_publish (traced), else the source timestamp (INFO_TS, the
            // writer's clock = the sender host's), to the sample's first sighting on the wire.
            let start = if wire {
                rclcpp.or(rmw).or(r.source_ts_ns.filter(|s| *s <= first_wire)).unwrap_or(first_wire)
            } else {
                rclcpp.or(rmw).unwrap_or(first_wire)
            };
            let end = if wire { first_wire } else { rmw.or(rclcpp).unwrap_or(first_wire) };
            let mut a = common("publish");
            a.push(kv_str("ddscope.sender", &sender));
            if let Some(n) = ros.and_then(|c| c.sender_node.as_deref()) {
                a.push(kv_str("ros.node", n));
            }
            if let Some(s) = r.sample_size {
                a.push(kv_int("dds.sample_size", s as i64));
            }
            if let Some(s) = r.source_ts_ns {
                a.push(kv_int("dds.source_ts_ns", s));
            }
            out.push((sender.clone(), make(SpanArgs { trace: &trace, name: publish_name.clone(), host: &sender, parent: None, kind: SpanKind::Producer, start, end }, a)));
            let child = |name: &str, start: i64, end: i64| -> HostSpan {
                (sender.clone(), make(SpanArgs { trace: &trace, name: name.to_string(), host: &sender, parent: Some(publish_id), kind: SpanKind::Internal, start, end }, common(name)))
            };
            if let (Some(a), Some(b)) = (rclcpp, rmw) {
                out.push(child("ros_publish", a, b));
            }
            if wire {
                match (rmw, r.source_ts_ns, r.source_ts_to_wire_ns) {
                    (Some(m), _, _) => out.push(child("dds_send", m, first_wire)),
                    (None, Some(s), Some(_)) => out.push(child("source_ts_to_wire", s, first_wire)),
                    _ => {}
                }
            }
        }
        // This receiver's delivery.
        let take = ros.and_then(|c| c.rmw_take_ts_ns);
        let cbs = ros.and_then(|c| c.callback_start_ts_ns);
        let cbe = ros.and_then(|c| c.callback_end_ts_ns);
        let complete = r.receiver_last_ts_ns.filter(|_| r.status == Status::Delivered);
        let start = if wire { first_wire } else { rmw.or(rclcpp).unwrap_or(first_wire) };
        let end = [cbe, cbs, take, complete, r.receiver_first_ts_ns].into_iter().flatten().max().unwrap_or(start);
        let recv_name = format!("receive {topic}");
        let recv_id = span_id(&trace, &recv_name, &receiver);
        let mut a = common("receive");
        a.push(kv_str("ddscope.sender", &sender));
        a.push(kv_str("ddscope.receiver", &receiver));
        a.push(kv_str("ddscope.status", r.status.as_str()));
        if let Some(n) = ros.and_then(|c| c.receiver_node.as_deref()) {
            a.push(kv_str("ros.node", n));
        }
        if let Some(t) = r.timing {
            a.push(kv_str("ddscope.timing", t.as_str()));
        }
        let recv = make(SpanArgs { trace: &trace, name: recv_name, host: &receiver, parent: Some(publish_id), kind: SpanKind::Consumer, start, end }, a);
        out.push((receiver.clone(), if r.status == Status::Lost || r.status == Status::Incomplete { error(recv, r.status.as_str()) } else { recv }));
        let child = |name: &str, start: i64, end: i64, extra: Vec<KeyValue>| -> Span {
            let mut a = common(name);
            a.extend(extra);
            make(SpanArgs { trace: &trace, name: name.to_string(), host: &receiver, parent: Some(recv_id), kind: SpanKind::Internal, start, end }, a)
        };
        if wire {
            let mut extra = vec![kv_str("ddscope.status", r.status.as_str())];
            for (k, v) in [("ddscope.first_first_ns", r.first_first_ns), ("ddscope.last_last_ns", r.last_last_ns), ("ddscope.jitter_ns", r.jitter_ns)] {
                if let Some(v) = v {
                    extra.push(kv_int(k, v));
                }
            }
            if r.repaired {
                extra.push(kv("ddscope.repaired", any_value::Value::BoolValue(true)));
            }
            let s = match (complete, r.receiver_first_ts_ns) {
                (Some(c), _) => child("message", first_wire, c, extra),
                (None, Some(f)) => error(child("message", first_wire, f, extra), "incomplete: some fragments never arrived"),
                (None, None) => error(child("message", first_wire, first_wire, extra), "lost: not seen at the receiver within the window"),
            };
            out.push((receiver.clone(), s));
            if let (Some(c), Some(t)) = (complete, take) {
                out.push((receiver.clone(), child("dds_receive", c, t, vec![])));
            }
        } else if let (Some(m), Some(t)) = (rmw, take) {
            let name = if r.status == Status::SameHost { "dds_local" } else { "dds_remote" };
            out.push((receiver.clone(), child(name, m, t, vec![])));
        }
        if let (Some(t), Some(c)) = (take, cbs) {
            out.push((receiver.clone(), child("executor", t, c, vec![])));
        }
        if let (Some(s), Some(e)) = (cbs, cbe) {
            out.push((receiver.clone(), child("callback", s, e, vec![])));
        }
        self.stats.deliveries.fetch_add(1, Relaxed);
        self.stats.spans.fetch_add((out.len() - before) as u64, Relaxed);
    }

    /// An incident `serve` judged, as an `incident <cause>` span in its sample's trace (under the
    /// receiver's `receive` span): the cause, the layer that took the excess and the evidence, on the
    /// trace a user opens for that sample. Every incident gets one, whatever `--trace-sample` kept:
    /// the samples worth a look. A trace-to-trace delivery without a sequence number has no trace id
    /// here (its trace is keyed by its publish time, which the incident does not keep): left out, counted.
    pub fn on_incident(&mut self, i: &Incident, out: &mut Vec<HostSpan>) {
        if i.sn <= 0 {
            self.stats.deliveries_left_out.fetch_add(1, Relaxed);
            return;
        }
        let trace = sample_trace_id(&i.writer, i.sn);
        let receiver: Arc<str> = i.receiver.clone();
        let parent = span_id(&trace, &format!("receive {}", i.topic), &receiver);
        let kinds: Vec<&str> = i.kinds.iter().map(|k| ddscope_core::latency::explain::kind_name(*k)).collect();
        let mut a = vec![
            kv_str("dds.topic", &i.topic),
            kv_str("dds.writer_guid", &i.writer_id),
            kv_int("dds.sn", i.sn),
            kv_str("ddscope.sender", &i.sender),
            kv_str("ddscope.receiver", &i.receiver),
            kv_str("ddscope.incident.cause", i.cause.name()),
            kv_str("ddscope.incident.kinds", &kinds.join(",")),
            kv_str("ddscope.incident.evidence", &i.evidence),
            kv_str("ddscope.incident.e2e_measure", i.e2e_measure),
            kv_int("ddscope.incident.excess_ns", i.excess_ns()),
        ];
        if let Some(l) = i.layer {
            a.push(kv_str("ddscope.incident.layer", l.name()));
        }
        for (k, v) in [("ddscope.incident.e2e_ns", i.e2e_ns), ("ddscope.incident.budget_ns", i.budget_ns), ("ddscope.incident.layer_ns", i.layer_ns), ("ddscope.incident.layer_typical_ns", i.layer_typical_ns)] {
            if let Some(v) = v {
                a.push(kv_int(k, v));
            }
        }
        let start = i.sender_first_ts_ns;
        let end = start + i.e2e_ns.unwrap_or(0).max(0);
        let span = make(SpanArgs { trace: &trace, name: format!("incident {}", i.cause.name()), host: &receiver, parent: Some(parent), kind: SpanKind::Internal, start, end }, a);
        out.push((receiver.clone(), error(span, &format!("incident: {}", i.cause.name()))));
        self.stats.spans.fetch_add(1, Relaxed);
    }

    /// The spans of one hop of a measured chain's instance (rows come hop
    /// by hop): from the second hop on, a `node` span in the hop's sample's
    /// trace — the relay's callback_start of its input to this publish —
    /// linked to the input sample's callback span; at the last hop, a
    /// `chain` span (first publish → last callback_start) linked to every
    /// hop's publish span. Only for samples that have a trace here.
    pub fn on_chain_row(&mut self, r: &ChainRow, last_hop: bool, out: &mut Vec<HostSpan>) {
        let h = &r.h;
        if self.instance.last().is_some_and(|p| p.chain != r.chain || p.instance != r.instance) || r.hop == 0 {
            self.instance.clear();
        }
        let Some(w) = h.writer else {
            self.stats.chain_spans_left_out.fetch_add(1, Relaxed);
            return;
        };
        let sn = h.sn.unwrap_or(0);
        let (trace, key) = if sn > 0 { (sample_trace_id(&w, sn), (w, sn)) } else {
            let row = LatencyRow { source_ts_ns: h.source_ts, ..LatencyRow::new(Level::Message, None, w, 0, h.sender.clone(), h.receiver.clone(), Status::Traced, h.source_ts.or(h.rclcpp_ts).unwrap_or(h.take_ts)) };
            trace_of(&row)
        };
        let topic = h.topic.as_deref().unwrap_or("?");
        let publish = span_id(&trace, &format!("publish {topic}"), &h.sender);
        let here = ChainHop { chain: r.chain.clone(), instance: r.instance, trace, publish, receiver: h.receiver.clone(), callback_start: h.callback_start_ts, rclcpp: h.rclcpp_ts };
        let traced = self.remembered.contains_key(&key);
        if let Some(prev) = self.instance.last() {
            match (traced, prev.callback_start, h.rclcpp_ts) {
                (true, Some(a), Some(b)) => {
                    let mut s = make(
                        SpanArgs { trace: &trace, name: format!("node {}", h.sender_node.as_deref().unwrap_or(&h.sender)), host: &h.sender, parent: Some(publish), kind: SpanKind::Internal, start: a, end: b },
                        vec![kv_str("ddscope.layer", "node"), kv_str("ddscope.chain", &r.chain), kv_int("ddscope.chain_instance", r.instance as i64), kv_int("ddscope.hop", r.hop as i64)],
                    );
                    s.links.push(span::Link {
                        trace_id: prev.trace.to_vec(),
                        span_id: span_id(&prev.trace, "callback", &prev.receiver).to_vec(),
                        attributes: vec![kv_str("ddscope.link", "chain input")],
                        ..Default::default()
                    });
                    out.push((h.sender.clone(), s));
                    self.stats.chain_spans.fetch_add(1, Relaxed);
                }
                _ => {
                    self.stats.chain_spans_left_out.fetch_add(1, Relaxed);
                }
            }
        }
        self.instance.push(here);
        if last_hop && self.instance.len() >= 2 {
            let first = &self.instance[0];
            match (traced, first.rclcpp, h.callback_start_ts) {
                (true, Some(a), Some(b)) => {
                    let recv = span_id(&trace, &format!("receive {topic}"), &h.receiver);
                    let mut s = make(
                        SpanArgs { trace: &trace, name: format!("chain {}", r.chain), host: &h.receiver, parent: Some(recv), kind: SpanKind::Internal, start: a, end: b },
                        vec![kv_str("ddscope.layer", "chain_e2e"), kv_str("ddscope.chain", &r.chain), kv_int("ddscope.chain_instance", r.instance as i64)],
                    );
                    s.links = self
                        .instance
                        .iter()
                        .enumerate()
                        .map(|(i, c)| span::Link { trace_id: c.trace.to_vec(), span_id: c.publish.to_vec(), attributes: vec![kv_int("ddscope.hop", i as i64)], ..Default::default() })
                        .collect();
                    out.push((h.receiver.clone(), s));
                    self.stats.chain_spans.fetch_add(1, Relaxed);
                }
                _ => {
                    self.stats.chain_spans_left_out.fetch_add(1, Relaxed);
                }
            }
        }
        // Bounded by the chain's length, which the chain tracker caps.
        if self.instance.len() > 64 {
            self.instance.remove(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddscope_core::discovery::TopicNames;
    use ddscope_core::latency::RosColumns;

    fn w() -> Guid {
        Guid::parse_hex("0110aabbccddeeff0011223300000102").unwrap()
    }

    fn delivered(sn: i64, receiver: &str) -> LatencyRow {
        LatencyRow {
            sample_size: Some(100),
            receiver_first_ts_ns: Some(1_500),
            receiver_last_ts_ns: Some(2_000),
            latency_ns: Some(1_000),
            source_ts_ns: Some(900),
            source_ts_to_wire_ns: Some(100),
            timing: Some(ddscope_core::latency::Timing::InTime),
            ros: Some(Box::new(RosColumns {
                rclcpp_publish_ts_ns: Some(800),
                rmw_publish_ts_ns: Some(850),
                rmw_take_ts_ns: Some(2_100),
                callback_start_ts_ns: Some(2_150),
                callback_end_ts_ns: Some(2_400),
                ros_publish_ns: Some(50),
                dds_send_ns: Some(150),
                dds_receive_ns: Some(100),
                executor_ns: Some(50),
                callback_ns: Some(250),
                ros_e2e_ns: Some(1_350),
                ..RosColumns::default()
            })),
            ..LatencyRow::new(Level::Message, Some(Arc::new(TopicNames::new("rt/image", "T"))), w(), sn, Arc::from("pc1"), Arc::from(receiver), ddscope_core::latency::Status::Delivered, 1_000)
        }
    }

    fn names(out: &[HostSpan]) -> Vec<(String, String)> {
        out.iter().map(|(h, s)| (h.to_string(), s.name.clone())).collect()
    }

    /// Oracle: the layer instants put in the rows; spans nest publish → receive → layers, ids derived.
    #[test]
    fn one_trace_per_sample_with_the_layers_as_spans() {
        let mut t = SampleTracer::new(TraceSampling::default());
        let mut out = vec![];
        t.on_row(&delivered(7, "pc2"), &mut out);
        t.on_row(&delivered(7, "pc3"), &mut out);
        let n = names(&out);
        assert_eq!(
            n,
            [
                ("pc1", "publish /image"),
                ("pc1", "ros_publish"),
                ("pc1", "dds_send"),
                ("pc2", "receive /image"),
                ("pc2", "message"),
                ("pc2", "dds_receive"),
                ("pc2", "executor"),
                ("pc2", "callback"),
                ("pc3", "receive /image"),
                ("pc3", "message"),
                ("pc3", "dds_receive"),
                ("pc3", "executor"),
                ("pc3", "callback"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        let trace = sample_trace_id(&w(), 7).to_vec();
        assert!(out.iter().all(|(_, s)| s.trace_id == trace));
        let by = |host: &str, name: &str| out.iter().find(|(h, s)| &**h == host && s.name == name).map(|(_, s)| s).unwrap();
        let publish = by("pc1", "publish /image");
        assert!(publish.parent_span_id.is_empty());
        assert_eq!((publish.start_time_unix_nano, publish.end_time_unix_nano), (800, 1_000));
        assert_eq!(by("pc2", "receive /image").parent_span_id, publish.span_id);
        let msg = by("pc2", "message");
        assert_eq!(msg.parent_span_id, by("pc2", "receive /image").span_id);
        assert_eq!((msg.start_time_unix_nano, msg.end_time_unix_nano), (1_000, 2_000));
        assert_eq!((by("pc2", "dds_receive").start_time_unix_nano, by("pc2", "dds_receive").end_time_unix_nano), (2_000, 2_100));
        assert_eq!((by("pc3", "callback").start_time_unix_nano, by("pc3", "callback").end_time_unix_nano), (2_150, 2_400));
        assert_eq!(by("pc2", "receive /image").end_time_unix_nano, 2_400);
        assert_ne!(by("pc2", "message").span_id, by("pc3", "message").span_id);
        // The same spans from another serve (a shard): identical ids.
        let mut t2 = SampleTracer::new(TraceSampling::default());
        let mut out2 = vec![];
        t2.on_row(&delivered(7, "pc2"), &mut out2);
        assert_eq!(out2[0].1.span_id, publish.span_id);
        assert_eq!(t.stats.pairs()[..4], [("samples", 1), ("deliveries", 2), ("deliveries_left_out", 0), ("spans", 13)]);
    }

    #[test]
    fn sampling_keeps_what_it_is_asked_to_and_counts_the_rest() {
        let s: TraceSampling = "every=10,lost".parse().unwrap();
        let mut t = SampleTracer::new(s);
        let mut out = vec![];
        for sn in 1..=30 {
            t.on_row(&delivered(sn, "pc2"), &mut out);
        }
        let mut lost = LatencyRow::new(Level::Message, None, w(), 31, Arc::from("pc1"), Arc::from("pc2"), ddscope_core::latency::Status::Lost, 5_000);
        lost.timing = Some(ddscope_core::latency::Timing::Lost);
        t.on_row(&lost, &mut out);
        let st = t.stats.pairs();
        assert_eq!((st[0].1, st[1].1, st[2].1), (4, 4, 27), "{st:?}");
        let lost_msg = out.iter().rev().find(|(_, s)| s.name == "message").unwrap();
        assert_eq!(lost_msg.1.status.as_ref().unwrap().code, status::StatusCode::Error as i32);
        assert!("every=0".parse::<TraceSampling>().is_err());
        assert!("sometimes".parse::<TraceSampling>().is_err());
        let over: TraceSampling = "over-budget".parse().unwrap();
        let mut over = TraceSampling { budgets: Budgets::new(&["/image:callback=200ns".parse().unwrap()]), ..over };
        assert!(over.keeps("/image", &delivered(1, "pc2")), "callback 250 ns is over 200 ns");
        over.budgets = Budgets::new(&["/image:callback=300ns".parse().unwrap()]);
        assert!(!over.keeps("/image", &delivered(1, "pc2")));
    }

    #[test]
    fn remembered_samples_are_bounded_and_evictions_counted() {
        let mut t = SampleTracer::new(TraceSampling { max_remembered: 3, ..TraceSampling::default() });
        let mut out = vec![];
        for sn in 1..=5 {
            t.on_row(&delivered(sn, "pc2"), &mut out);
        }
        assert_eq!(t.remembered.len(), 3);
        assert_eq!(t.remembered.iter_lru().count(), 3);
        assert_eq!(t.stats.remembered_evicted.load(Relaxed), 2);
    }

    /// Oracle: the instants put in the rows. A two-hop chain /raw_image (pc1, same host) → /filter →
    /// /image (pc1 → pc2): the node span sits in /image's trace and links to /raw_image's callback
    /// span (which exists there), the chain span links to both publishes; a chain whose output
    /// sample has no trace is counted, not drawn.
    #[test]
    fn chain_hops_are_node_spans_linked_to_their_input_sample() {
        use ddscope_core::ros2::chain::{Hop, HopLayers};
        use ddscope_core::ros2::join::{Delivery, Join};
        let wa = Guid::parse_hex("0110aabbccddeeff0011223300000a03").unwrap();
        let wb = Guid::parse_hex("0110aabbccddeeff0011223300000b03").unwrap();
        let ros = |p: i64, m: i64, t: i64, cs: i64, ce: i64| {
            Some(Box::new(RosColumns {
                rclcpp_publish_ts_ns: Some(p),
                rmw_publish_ts_ns: Some(m),
                rmw_take_ts_ns: Some(t),
                callback_start_ts_ns: Some(cs),
                callback_end_ts_ns: Some(ce),
                ..RosColumns::default()
            }))
        };
        let a = LatencyRow {
            ros: ros(100, 110, 150, 160, 300),
            ..LatencyRow::new(Level::Message, Some(Arc::new(TopicNames::new("rt/raw_image", "T"))), wa, 5, Arc::from("pc1"), Arc::from("pc1"), ddscope_core::latency::Status::SameHost, 110)
        };
        let b = LatencyRow {
            receiver_first_ts_ns: Some(380),
            receiver_last_ts_ns: Some(400),
            latency_ns: Some(100),
            ros: ros(250, 260, 450, 460, 500),
            ..LatencyRow::new(Level::Message, Some(Arc::new(TopicNames::new("rt/image", "T"))), wb, 5, Arc::from("pc1"), Arc::from("pc2"), ddscope_core::latency::Status::Delivered, 300)
        };
        let hop = |i: u32, w: Guid, topic: &str, receiver: &str, node: Option<&str>, p: i64, cs: i64| ChainRow {
            chain: Arc::from("/raw_image,/image"),
            instance: 1,
            hop: i,
            h: Hop {
                take: (0, i as u64),
                cause: None,
                topic: Some(Arc::from(topic)),
                level: if i == 0 { Delivery::SameHost } else { Delivery::Wire },
                join: Join::SourceTs,
                sender: Arc::from("pc1"),
                receiver: Arc::from(receiver),
                sender_node: node.map(Arc::from),
                receiver_node: None,
                writer: Some(w),
                sn: Some(5),
                source_ts: Some(p),
                rclcpp_ts: Some(p),
                take_ts: cs - 10,
                callback_start_ts: Some(cs),
                layers: HopLayers::default(),
                inputs: Default::default(),
            },
            node_ns: None,
            chain_start_ts_ns: Some(100),
            chain_e2e_ns: Some(360),
        };
        let mut t = SampleTracer::new(TraceSampling::default());
        let mut out = vec![];
        t.on_row(&a, &mut out);
        t.on_row(&b, &mut out);
        let (ta, tb) = (sample_trace_id(&wa, 5), sample_trace_id(&wb, 5));
        let callback_a = out.iter().find(|(h, s)| &**h == "pc1" && s.name == "callback" && s.trace_id == ta.to_vec()).expect("a's callback span").1.span_id.clone();
        let publish = |tr: &[u8; 16], topic: &str| out.iter().find(|(_, s)| s.trace_id == tr.to_vec() && s.name == format!("publish {topic}")).unwrap().1.span_id.clone();
        let (pa, pb) = (publish(&ta, "/raw_image"), publish(&tb, "/image"));
        let receive_b = out.iter().find(|(h, s)| &**h == "pc2" && s.name == "receive /image").unwrap().1.span_id.clone();
        let mut chain = vec![];
        t.on_chain_row(&hop(0, wa, "/raw_image", "pc1", None, 100, 160), false, &mut chain);
        assert!(chain.is_empty(), "the first hop has no node before it");
        t.on_chain_row(&hop(1, wb, "/image", "pc2", Some("/filter"), 250, 460), true, &mut chain);
        assert_eq!(names(&chain), [("pc1".to_string(), "node /filter".to_string()), ("pc2".to_string(), "chain /raw_image,/image".to_string())]);
        let node = &chain[0].1;
        assert_eq!((node.trace_id.clone(), node.parent_span_id.clone()), (tb.to_vec(), pb.clone()));
        assert_eq!((node.start_time_unix_nano, node.end_time_unix_nano), (160, 250), "the relay's callback_start of its input → its publish");
        assert_eq!(node.links.len(), 1);
        assert_eq!((node.links[0].trace_id.clone(), node.links[0].span_id.clone()), (ta.to_vec(), callback_a));
        let c = &chain[1].1;
        assert_eq!((c.trace_id.clone(), c.parent_span_id.clone()), (tb.to_vec(), receive_b));
        assert_eq!((c.start_time_unix_nano, c.end_time_unix_nano), (100, 460), "first publish → last callback_start");
        let links: Vec<(Vec<u8>, Vec<u8>)> = c.links.iter().map(|l| (l.trace_id.clone(), l.span_id.clone())).collect();
        assert_eq!(links, [(ta.to_vec(), pa), (tb.to_vec(), pb)]);
        assert_eq!(t.stats.chain_spans.load(Relaxed), 2);

        // The output sample sampled out: its hop spans are counted as left out, not drawn.
        let mut t = SampleTracer::new("none".parse().unwrap());
        let mut out = vec![];
        t.on_row(&a, &mut out);
        t.on_row(&b, &mut out);
        t.on_chain_row(&hop(0, wa, "/raw_image", "pc1", None, 100, 160), false, &mut out);
        t.on_chain_row(&hop(1, wb, "/image", "pc2", Some("/filter"), 250, 460), true, &mut out);
        assert!(out.is_empty());
        assert_eq!((t.stats.chain_spans.load(Relaxed), t.stats.chain_spans_left_out.load(Relaxed)), (0, 2));
        assert_eq!(t.stats.deliveries_left_out.load(Relaxed), 2);
    }
}
